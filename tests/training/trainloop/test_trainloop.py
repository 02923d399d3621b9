"""Train-in-the-loop on CPU: a tiny model, real TRL jobs, real evaluation through the RLM loop.

Rewards are near zero with a random tiny model; what is checked is the loop's bookkeeping:
rewards = post - pre, seen vs withheld families, failures recorded and the loop going on,
resume after an interruption, overlap refusal, and the LM proposer's repair of bad jobs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlmkit
from optimizers.backends.testing import build_tiny_qwen
from optimizers.compile import EmptyDatasetError, Filters, compile_sft
from optimizers.trainloop import (
    BuiltDataset,
    JobRecord,
    JobSpace,
    LMProposer,
    LocalExecutor,
    ModelRef,
    OptunaProposer,
    ProposedJob,
    TrainTuner,
)
from optimizers.trainloop.hf_serve import serve_hf
from programs.tasks import generate, score
from rlmkit.errors import RunError, UserError
from rlmkit.testing.synthetic_runs import make_run


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    return str(build_tiny_qwen(tmp_path_factory.mktemp("tiny") / "model"))


def build_dataset(proposal: ProposedJob, out: Path) -> BuiltDataset:
    """Training data: solved runs of the chosen families (synthetic teacher runs)."""
    runs = []
    for family in proposal.families:
        for i in range(4):
            run = make_run(task=f"{family}-train-{i}", score=[1.0, 0.5, 1.0, 0.25][i], n_turns=2)
            run.meta.task["suite"] = family
            runs.append(run)
    result = compile_sft(runs, filters=Filters(min_score=proposal.min_score))
    result.write(out, seed=0, val_fraction=0.25)
    return BuiltDataset(out, {r.meta.task["example_id"] for r in runs})


def make_evaluate(calls: list):
    def evaluate(model: ModelRef, examples) -> dict[str, float]:
        calls.append(model)
        server = serve_hf(model.base_model, model.adapter, max_new_tokens=8)
        try:
            lm = rlmkit.LM("openai/local", api_base=server.url, api_key="local", cache=False)
            rlm = rlmkit.RLM("context, question -> answer", lm=lm, max_iterations=1, sandbox="inline")
            per_family: dict[str, list[float]] = {}
            for ex in examples:
                try:
                    value = score(ex, rlm(**ex.inputs))
                except RunError:
                    value = 0.0
                per_family.setdefault(ex.suite, []).append(value)
            return {family: sum(v) / len(v) for family, v in per_family.items()}
        finally:
            server.stop()

    return evaluate


def eval_set():
    return generate("needle", n=1, length=1_000, seed=7) + generate("aggregation", n=1, length=2_000, seed=7)


def test_optuna_loop_records_rewards_failures_and_resumes(tmp_path, tiny_model):
    space = JobSpace(
        families=["needle", "aggregation"],
        held_out=["aggregation"],
        lengths=[2_000],
        min_scores=[0.5],
        steps=[1],
        lora_ranks=[4],
        lr=(1e-4, 1e-3),
    )
    calls: list[ModelRef] = []

    def tuner():
        proposer = OptunaProposer(space, f"sqlite:///{tmp_path / 'study.db'}", seed=0)
        return TrainTuner(
            proposer=proposer,
            build_dataset=build_dataset,
            evaluate=make_evaluate(calls),
            eval_examples=eval_set(),
            test_examples=generate("needle", n=1, length=1_000, seed=8),  # picks nothing: reports the best
            base_model=tiny_model,
            out_dir=tmp_path / "loop",
            executor=LocalExecutor(timeout_s=300),
        )

    report = tuner().run(1)
    assert [r.state for r in report.records] == ["done"], report.rows()
    job = report.records[0]
    assert job.proposal["families"] == ["needle"]  # the held-out family is never trained on
    assert job.reward == pytest.approx(sum(job.post.values()) / 2 - sum(job.pre.values()) / 2)
    assert job.reward_withheld == pytest.approx(job.post["aggregation"] - job.pre["aggregation"])
    assert job.reward_seen == pytest.approx(job.post["needle"] - job.pre["needle"])
    assert Path(job.artifact, "adapter_config.json").exists()
    # pre measured once, then the trained model; then base and best job on the test set
    assert [c.adapter for c in calls] == [None, job.artifact, None, job.artifact]
    assert report.test["job"] == 0 and set(report.test["post"]) == {"needle"}
    assert report.test["reward"] == pytest.approx(
        report.test["post"]["needle"] - report.test["pre"]["needle"]
    )

    # an interrupted loop resumes: the finished job is not run again, nor the pre evaluation
    report = tuner().run(2)
    assert len(report.records) == 2 and report.records[0] == job
    assert len(calls) == 5 + (
        2 if report.best.index == 1 else 0
    )  # the test set is re-run only for a new best
    assert report.plot(tmp_path / "curve.png").stat().st_size > 0
    lines = (tmp_path / "loop" / "jobs.jsonl").read_text().splitlines()
    assert [JobRecord.model_validate_json(line).index for line in lines] == [0, 1]


class ScriptedProposer(OptunaProposer):
    """Replays fixed proposals (to drive failure paths deterministically)."""

    def __init__(self, space, proposals, storage):
        super().__init__(space, storage)
        self.proposals = list(proposals)

    def propose(self, history):
        _, token = super().propose(history)
        return self.proposals[len(history)], token


def test_failed_rejected_and_overlapping_jobs_get_no_reward(tmp_path, tiny_model):
    space = JobSpace(families=["needle"], lengths=[2_000], steps=[1], lora_ranks=[4], lr=(1e-4, 1e-3))
    proposals = [
        ProposedJob(
            families=["needle"], length=2_000, min_score=1.0, lr=1e-4, steps=1, lora_rank=4
        ),  # base missing
        ProposedJob(families=["needle"], length=2_000, min_score=0.99, lr=1e-4, steps=1, lora_rank=4),
    ]
    examples = eval_set()

    def overlapping(proposal, out):
        built = build_dataset(proposal, out)
        return BuiltDataset(built.path, built.example_ids | {examples[0].id})

    tuner = TrainTuner(
        proposer=ScriptedProposer(space, proposals, f"sqlite:///{tmp_path / 's.db'}"),
        build_dataset=overlapping,
        evaluate=lambda m, ex: {"needle": 0.0},
        eval_examples=examples,
        base_model=tiny_model,
        out_dir=tmp_path / "loop",
    )
    record = tuner.run(1).records[0]
    assert record.state == "rejected" and examples[0].id in record.reason and record.reward is None

    def empty(proposal, out):
        raise EmptyDatasetError("min_score removed every run")

    tuner = TrainTuner(
        proposer=ScriptedProposer(space, proposals, f"sqlite:///{tmp_path / 's2.db'}"),
        build_dataset=empty,
        evaluate=lambda m, ex: {"needle": 0.0},
        eval_examples=examples,
        base_model=tiny_model,
        out_dir=tmp_path / "loop2",
    )
    assert tuner.run(1).records[0].reason.startswith("dataset: min_score removed")

    crashing = TrainTuner(
        proposer=ScriptedProposer(space, proposals, f"sqlite:///{tmp_path / 's3.db'}"),
        build_dataset=build_dataset,
        evaluate=lambda m, ex: {"needle": 0.0},
        eval_examples=examples,
        base_model=str(tmp_path / "no-such-model"),
        out_dir=tmp_path / "loop3",
        executor=LocalExecutor(timeout_s=120),
    )
    record = crashing.run(1).records[0]
    assert record.state == "failed" and "no-such-model" in record.reason and record.reward is None


def test_lm_proposer_feeds_back_bad_jobs_and_logs_its_own_runs(tmp_path, serve):
    space = JobSpace(families=["needle", "pairs"], held_out=["pairs"])
    good = {
        "families": ["needle"],
        "length": 2000,
        "min_score": 0.5,
        "backend": "trl-sft",
        "lr": 0.0001,
        "steps": 10,
        "batch_size": 2,
        "lora_rank": 8,
    }
    replies = iter(
        [
            "[[ ## job ## ]]\nnot json at all\n\n[[ ## completed ## ]]",
            "[[ ## job ## ]]\n" + json.dumps({**good, "families": ["pairs"]}) + "\n\n[[ ## completed ## ]]",
            "[[ ## job ## ]]\n" + json.dumps(good) + "\n\n[[ ## completed ## ]]",
        ]
    )
    server, lm = serve(lambda body: next(replies))
    proposer = LMProposer(space, lm, log_dir=tmp_path / "proposer")
    job, token = proposer.propose([])
    assert job.families == ["needle"] and proposer.parse_errors == 2
    assert "not trainable" in server.requests[2]["messages"][-1]["content"]  # the space error was fed back
    proposer.tell(token, 0.25)
    runs = rlmkit.TrajectoryLog(tmp_path / "proposer").runs()
    assert runs[0].score == 0.25 and runs[0].n_turns == 3


def test_bad_space_and_empty_eval_set_are_refused(tmp_path):
    with pytest.raises(ValueError, match="no family left to train"):
        JobSpace(families=["needle"], held_out=["needle"])
    with pytest.raises(ValueError, match=r"backends \['prime-rl'\] cannot be in the loop"):
        JobSpace(
            families=["needle"], backends=["trl-sft", "prime-rl"]
        )  # its artifact is a config, not a model
    space = JobSpace(families=["needle"])
    inside = ProposedJob(families=["needle"], length=2_000, min_score=0.5, lr=1e-4, steps=10, lora_rank=8)
    space.check(inside)
    for field, value in (
        ("length", 3_000),
        ("min_score", 0.7),
        ("steps", 11),
        ("lora_rank", 4),
        ("batch_size", 64),
    ):
        with pytest.raises(ValueError, match=f"{field} {value} is not one of"):
            space.check(inside.model_copy(update={field: value}))
    with pytest.raises(UserError, match="shares examples"):
        TrainTuner(
            proposer=OptunaProposer(space, f"sqlite:///{tmp_path / 'y.db'}"),
            build_dataset=build_dataset,
            evaluate=lambda m, e: {},
            eval_examples=eval_set(),
            test_examples=eval_set()[:1],
            base_model="x",
            out_dir=tmp_path,
        )
    with pytest.raises(UserError):
        TrainTuner(
            proposer=OptunaProposer(space, f"sqlite:///{tmp_path / 'x.db'}"),
            build_dataset=build_dataset,
            evaluate=lambda m, e: {},
            eval_examples=[],
            base_model="x",
            out_dir=tmp_path,
        )


def test_cli_train_loop_end_to_end(tmp_path, tiny_model):
    from typer.testing import CliRunner

    from rlmkit.cli import app

    runs_dir = tmp_path / "runs"
    log = rlmkit.TrajectoryLog(runs_dir)
    for i in range(4):
        run = make_run(task=f"needle-train-{i}", score=1.0, n_turns=2)
        run.meta.task.update(suite="needle", length=1_000)
        log.write(run)
    out = tmp_path / "loop"
    args = [
        "train-loop",
        "--families",
        "needle",
        "--held-out",
        "aggregation",
        "--runs",
        str(runs_dir),
        "--base-model",
        tiny_model,
        "--out",
        str(out),
        "--jobs",
        "1",
        "--eval-n",
        "1",
        "--test-n",
        "1",
        "--eval-length",
        "2000",
        "--eval-iterations",
        "1",
        "--eval-max-tokens",
        "8",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    records = [JobRecord.model_validate_json(line) for line in (out / "jobs.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0].state == "done", records
    assert set(records[0].post) == {"needle", "aggregation"} and records[0].reward_withheld is not None
    assert (out / "rewards.png").stat().st_size > 0
    assert json.loads((out / "test.json").read_text())["job"] == 0 and "on the test set" in result.output


def test_ray_executor_runs_jobs_and_reports_failures(tmp_path):
    import ray  # the `cluster` extra

    from optimizers.trainloop import RayExecutor

    proposal = ProposedJob(families=["needle"], length=2_000, min_score=0.5, lr=1e-4, steps=1, lora_rank=4)
    built = build_dataset(proposal, tmp_path / "data")
    job = proposal.to_train_job(dataset=built.path, base_model="any", output_dir=tmp_path / "out")
    executor = RayExecutor(None, timeout_s=120)  # a local Ray instance
    try:
        outcome = executor.run(job, "openai-jsonl")  # an export backend: runs in a Ray worker, no GPU needed
        assert outcome.result is not None and outcome.result.status == "exported", outcome.reason
        assert Path(outcome.result.artifact).exists()
        failed = executor.run(job.model_copy(update={"kind": "dpo"}), "openai-jsonl")  # sft rows, dpo job
        assert failed.result is None and "DatasetKindError" in failed.reason
    finally:
        executor.shutdown()
        assert not ray.is_initialized()


def test_options_every_job_shares_reach_the_train_job(tmp_path):
    proposal = ProposedJob(families=["needle"], length=2_000, min_score=0.5, lr=1e-4, steps=1, lora_rank=4)
    built = build_dataset(proposal, tmp_path / "data")
    job = proposal.to_train_job(
        dataset=built.path,
        base_model="students",
        output_dir=tmp_path / "out",
        options={"gguf_file": "s.gguf"},
    )
    assert job.options == {"gguf_file": "s.gguf"}  # trl_common loads the base from that GGUF file
    assert proposal.to_train_job(dataset=built.path, base_model="m", output_dir=tmp_path / "o").options == {}
