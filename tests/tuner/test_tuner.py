"""RLMTuner against a real RLM and a scripted model whose accuracy depends on the instruction
(a keyword) and on max_iterations (>= 3): the tuner must find that configuration."""

from __future__ import annotations

import time

import optuna
import pytest

import rlmkit
from optimizers import Bootstrap, IntKnob, RLMTuner, SearchSpace, load_tuned
from optimizers.tuner.scripted import KEYWORD, KeywordResponder, secret_examples, secret_metric
from rlmkit.errors import ConfigError, UserError

optuna.logging.set_verbosity(optuna.logging.WARNING)

CANDIDATES = [
    "Answer quickly.",
    "Think step by step before you write code.",
    f"{KEYWORD}: look at the data first, then search every line for what is asked.",
    "Use llm_query on chunks of the context.",
]


@pytest.fixture
def scripted(serve):
    responder = KeywordResponder()
    server, lm = serve(responder)
    base = rlmkit.RLM("context, question -> answer: int", lm=lm, sandbox="inline", max_iterations=3)
    return responder, server, lm, base


def _space(**kw):
    return SearchSpace(knobs=[IntKnob("max_iterations", 1, 4)], instructions=list(CANDIDATES), **kw)


def _tuner(base, tmp_path, metric=secret_metric, n_trials=12, **kw):
    kw.setdefault("space", _space())
    return RLMTuner(
        base,
        metric,
        secret_examples(4),
        n_trials=n_trials,
        cost_unit="tokens",
        out_dir=tmp_path / "run",
        **kw,
    )


def test_tuner_finds_the_keyword_instruction_with_enough_iterations(scripted, tmp_path):
    responder, _server, lm, base = scripted
    start = time.monotonic()
    result = _tuner(base, tmp_path).fit()
    elapsed = time.monotonic() - start

    best = result.trial
    assert best.accuracy == 1.0 and KEYWORD in result.config.instruction
    assert result.config.knobs["max_iterations"] >= 3
    first_hit = min(r.number for r in result.rows if r.complete and r.accuracy == 1.0)
    print(
        f"\nbest trial {best.number} {best.params}, first perfect trial #{first_hit}, "
        f"{len(result.rows)} trials in {elapsed:.1f}s, states "
        f"{sorted((s, sum(r.state == s for r in result.rows)) for s in {r.state for r in result.rows})}"
    )
    print(result.to_table())

    # The front trades accuracy for cost: the best is the most accurate, a cheap wrong one is cheaper.
    front = result.front
    assert front[0].accuracy == 1.0 and front[-1].cost < front[0].cost
    assert all(KEYWORD not in (r.params["instruction"]) for r in front[1:] if r.accuracy == 0.0)
    assert result.to_table().splitlines()[0].startswith("trial")
    assert result.plot(tmp_path / "front.png").stat().st_size > 1000
    assert (tmp_path / "run" / "study.db").exists()

    # The chosen program round-trips through save/load and really uses the tuned instruction.
    saved = result.save(tmp_path / "best")
    fresh = rlmkit.RLM("context, question -> answer: int", lm=lm, sandbox="inline", max_iterations=1)
    tuned = load_tuned(saved, fresh)
    assert tuned.instructions == result.config.instruction and tuned.max_iterations >= 3
    example = secret_examples(1, seed=99)[0]
    before = len(responder.root_requests)
    prediction = tuned(**example.inputs())
    assert prediction.answer == example.answer
    assert KEYWORD in responder.root_requests[before]["messages"][0]["content"]


def test_a_metric_that_raises_fails_those_trials_and_the_study_goes_on(scripted, tmp_path):
    _, _, _, base = scripted

    def picky_metric(example, prediction):
        if prediction.answer != example.answer:
            raise ValueError(f"refusing to score the decoy {prediction.answer}")
        return 1.0

    result = _tuner(base, tmp_path, metric=picky_metric, n_trials=6).fit()
    failed = result.failed
    assert len(result.rows) == 6 and failed
    assert all("metric raised ValueError: refusing to score the decoy" in r.error for r in failed)
    assert {r.state for r in result.rows} >= {"FAIL"}


def test_a_metric_returning_non_numbers_fails_every_trial_without_raising(scripted, tmp_path):
    _, _, _, base = scripted
    result = _tuner(base, tmp_path, metric=lambda ex, pred: "correct", n_trials=3).fit()
    assert [r.state for r in result.rows] == ["FAIL"] * 3
    assert "not a number" in result.rows[0].error
    assert result.program is None and result.front == []
    with pytest.raises(UserError, match="no trial finished"):
        result.save(tmp_path / "nothing")


def test_bad_input_is_refused_before_any_model_call(scripted, tmp_path):
    _, server, _, base = scripted
    with pytest.raises(UserError, match="train set is empty"):
        RLMTuner(base, secret_metric, [], space=_space())
    with pytest.raises(UserError, match="nothing to search"):
        RLMTuner(
            base,
            secret_metric,
            secret_examples(2),
            space=SearchSpace(knobs=[IntKnob("max_iterations", 3, 3)]),
        )
    with pytest.raises(ConfigError, match="cost_cap"):
        RLMTuner(base, secret_metric, secret_examples(2), space=_space(), cost_cap=10.0)
    tuner = _tuner(base, tmp_path, storage="postgresql://tuner:hunter2@127.0.0.1:1/studies")
    with pytest.raises(ConfigError, match="cannot open study storage") as info:
        tuner.fit()
    assert "hunter2" not in str(info.value)
    assert server.requests == []


def test_an_interrupted_study_resumes_with_the_same_candidates(scripted, serve, tmp_path):
    _responder, server, lm, base = scripted
    first = _tuner(
        base,
        tmp_path,
        n_trials=3,
        space=SearchSpace(knobs=[IntKnob("max_iterations", 1, 4)]),
        proposer_lm=lm,
        bootstrap=Bootstrap(examples=1, n_instructions=3),
    ).fit()
    assert len(first.rows) == 3
    candidates = first.study.user_attrs["rlmkit.instructions"]
    assert len(candidates) == 4 and any(KEYWORD in text for text in candidates)  # current + 3 proposed

    # A second run (new process in real life) with a proposer that would say something else.
    other = KeywordResponder(proposals=["Something else entirely."])
    other_server, other_lm = serve(other)
    requests_before = len(server.requests)
    second = _tuner(
        base,
        tmp_path,
        n_trials=5,
        space=SearchSpace(knobs=[IntKnob("max_iterations", 1, 4)]),
        proposer_lm=other_lm,
        bootstrap=Bootstrap(examples=1, n_instructions=3),
    ).fit()
    assert [r.number for r in second.rows] == [0, 1, 2, 3, 4]  # 2 more trials, not 5
    assert second.study.user_attrs["rlmkit.instructions"] == candidates
    assert other_server.requests == [] and len(server.requests) > requests_before


def test_demos_from_successful_runs_reach_the_system_prompt(scripted, tmp_path):
    responder, server, lm, base = scripted
    base.instructions = CANDIDATES[2]  # the base program succeeds, so bootstrap runs yield demos
    tuner = _tuner(
        base,
        tmp_path,
        n_trials=4,
        space=SearchSpace(knobs=[IntKnob("max_iterations", 3, 4)]),
        proposer_lm=lm,
        bootstrap=Bootstrap(examples=2, n_instructions=2, max_demos=1),
    )
    result = tuner.fit()
    demos = result.study.user_attrs["rlmkit.demos"]
    assert len(demos) == 1 and "SUBMIT(answer=int(re.search" in demos[0]["transcript"]
    proposer_prompt = [r for r in server.requests if "<instruction>" in str(r["messages"][-1]["content"])]
    assert proposer_prompt and "Successful runs" in proposer_prompt[0]["messages"][-1]["content"]
    with_demos = [r for r in result.rows if r.params["n_demos"] == 1]
    assert with_demos, "some trial should have used the demo"
    systems = [r["messages"][0]["content"] for r in responder.root_requests]
    assert any("Worked examples" in s and "SUBMIT(answer=int(re.search" in s for s in systems)


def test_single_objective_with_a_cost_cap_and_a_pruner(scripted, tmp_path):
    _, _, _, base = scripted
    pruner = optuna.pruners.ThresholdPruner(lower=0.5)  # stop a trial that misses its first examples
    result = _tuner(base, tmp_path, objectives=("accuracy",), cost_cap=1e9, pruner=pruner, n_trials=8).fit()
    pruned = [r for r in result.rows if r.state == "PRUNED"]
    assert pruned and all(r.n_examples < 4 for r in pruned)
    assert result.within_cap and result.trial.accuracy == 1.0

    capped = _tuner(base, tmp_path / "capped", objectives=("accuracy",), cost_cap=1.0, n_trials=4).fit()
    assert not capped.within_cap  # every configuration costs more than one token per example
    assert capped.trial.cost == min(r.cost for r in capped.rows if r.complete)
