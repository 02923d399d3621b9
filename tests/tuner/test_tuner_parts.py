"""The tuner's parts on their own: search space, Pareto front and table, demos, proposer parsing,
storage errors. (The whole tuner against a scripted model is in test_tuner.py.)"""

from __future__ import annotations

import optuna
import pytest

from optimizers.tuner.demos import ScoredRun, rank_runs, render_transcript
from optimizers.tuner.evaluation import TrialFailure, check_score, default_stages
from optimizers.tuner.instruction_proposer import parse_instructions
from optimizers.tuner.report import (
    TrialRow,
    accuracy_upper_bound,
    dominated_by_front,
    format_table,
    pareto_front,
    plot_front,
)
from optimizers.tuner.space import CategoricalKnob, FloatKnob, IntKnob, SearchSpace
from optimizers.tuner.storage import open_storage, redact
from rlmkit.errors import ConfigError, UserError
from rlmkit.run.describe import describe_variable
from rlmkit.trajectory import CodeBlock, Message, RunMeta, Trajectory, Turn, Usage

optuna.logging.set_verbosity(optuna.logging.WARNING)


# ------------------------------------------------------------------ space
def test_space_samples_every_declared_choice_and_rebuilds_it_from_params():
    space = SearchSpace(
        knobs=[
            IntKnob("max_iterations", 2, 6),
            FloatKnob("temperature", 0.0, 1.0),
            CategoricalKnob("sub_model", ("small", {"name": "big"})),
        ],
        instructions=["a", "b", "c"],
        demos=["d1", "d2", "d3"],
        max_demos=2,
    )
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen = set()
    for _ in range(30):
        trial = study.ask()
        config = space.sample(trial)
        assert 2 <= config.knobs["max_iterations"] <= 6
        assert config.knobs["sub_model"] in ("small", {"name": "big"})
        assert len(config.demos) <= 2
        seen.add(config.instruction)
        study.tell(trial, 0.0)
        assert space.config_from_params(trial.params) == config
    assert seen == {"a", "b", "c"}


def test_fixed_knobs_are_used_but_not_searched():
    space = SearchSpace(knobs=[IntKnob("max_depth", 1, 1)], instructions=["only"])
    assert not space.searchable()
    with pytest.raises(UserError, match="nothing to search"):
        space.require_searchable()
    trial = optuna.create_study().ask()
    config = space.sample(trial)
    assert config.knobs == {"max_depth": 1} and config.instruction == "only" and trial.params == {}


@pytest.mark.parametrize(
    "make",
    [
        lambda: IntKnob("x", 5, 1),
        lambda: CategoricalKnob("x", ()),
        lambda: SearchSpace(knobs=[IntKnob("instruction", 1, 2)]),
        lambda: SearchSpace(knobs=[IntKnob("x", 1, 2), IntKnob("x", 1, 3)]),
    ],
)
def test_bad_spaces_are_config_errors(make):
    with pytest.raises(ConfigError):
        make()


# ------------------------------------------------------------------ evaluation helpers
def test_scores_must_be_finite_numbers():
    assert check_score(True) == 1.0 and check_score(0.25) == 0.25
    for bad in (None, "1.0", float("nan"), [1]):
        with pytest.raises(TrialFailure, match="not a"):
            check_score(bad)


def test_stages_grow_to_the_whole_set():
    assert default_stages(2) == [2]
    assert default_stages(8) == [2, 4, 8]
    assert default_stages(10)[-1] == 10


# ------------------------------------------------------------------ report
def _row(number, accuracy, cost, state="COMPLETE"):
    return TrialRow(
        number=number,
        state=state,
        accuracy=accuracy,
        cost=cost,
        n_examples=4,
        params={"max_iterations": number},
    )


def test_pareto_front_keeps_only_undominated_finished_trials():
    rows = [
        _row(0, 1.0, 900.0),
        _row(1, 0.0, 100.0),
        _row(2, 0.5, 950.0),
        _row(3, 1.0, 800.0),
        _row(4, 0.0, 100.0),
        _row(5, 1.0, 10.0, state="PRUNED"),
        _row(6, None, None, state="FAIL"),
    ]
    front = pareto_front(rows)
    assert [r.number for r in front] == [3, 1, 4]  # 0 and 2 dominated by 3; 4 ties with 1
    table = format_table(front, "tokens")
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["trial", "accuracy", "cost"] and len(lines) == 2 + len(front)
    assert "800" in lines[2]


def test_multi_objective_pruning_stops_only_what_the_front_beats_on_both_counts():
    front = pareto_front([_row(0, 1.0, 900.0), _row(1, 0.25, 100.0)])
    assert dominated_by_front(front, 0.5, 950.0)  # less accurate than #0 and dearer
    assert not dominated_by_front(front, 0.5, 500.0)  # cheaper than #0, better than #1: may join the front
    assert not dominated_by_front(front, 0.0, 50.0)  # the cheapest so far
    assert not dominated_by_front([], 0.0, 1e9)


def test_a_trial_is_not_stopped_for_missing_its_first_example():
    front = pareto_front([_row(0, 0.5, 100.0), _row(1, 0.75, 900.0)])
    assert dominated_by_front(front, 0.0, 500.0)  # without n, a partial score is taken at face value
    assert not dominated_by_front(front, 0.0, 500.0, n=1)  # one miss: it may still reach 0.79
    assert dominated_by_front(front, 0.0, 500.0, n=4)  # four misses: 0.49 at best, under #0's 0.5
    assert not dominated_by_front(front, 0.25, 500.0, n=8)  # 2 of 8: up to 0.59, above #0's 0.5 ...
    assert dominated_by_front(front, 0.25, 500.0, n=40)  # ... and 10 of 40 cannot reach it
    assert accuracy_upper_bound(1.0, 3) == 1.0 and accuracy_upper_bound(0.0, 0) == 1.0


def test_summary_keeps_study_attributes_json():
    config = SearchSpace(knobs=[CategoricalKnob("sub_lm", (object(),))]).config_from_params({})
    assert isinstance(config.summary()["sub_lm"], str)


def test_plot_writes_an_image(tmp_path):
    path = plot_front([_row(0, 1.0, 900.0), _row(1, 0.0, 100.0)], tmp_path / "p" / "front.png", "tokens")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ demos
def _trajectory(n_turns: int, reply_chars: int = 50, question: str = "q?") -> Trajectory:
    meta = RunMeta(
        signature="context, question -> answer",
        protocol="submit",
        sandbox="inline",
        inputs=[describe_variable("context", "x" * 50_000), describe_variable("question", question)],
    )
    turns = [
        Turn(
            index=i,
            keep=0,
            new_messages=[Message(role="user", content="go")],
            reply=f"```repl\nprint({i})  # {'y' * reply_chars}\n```",
            blocks=[CodeBlock(code=f"print({i})", stdout="z" * 5_000)],
        )
        for i in range(n_turns)
    ]
    turns[-1].reply = "```repl\nSUBMIT(answer=7)\n```"
    return Trajectory(
        meta=meta, turns=turns, outputs={"answer": 7}, status="ok", usage=Usage(prompt_tokens=10 * n_turns)
    )


def test_transcript_keeps_the_protocol_text_and_never_the_context_body():
    text = render_transcript(_trajectory(2), max_chars=2_000)
    assert "SUBMIT(answer=7)" in text and "Turn 1:" in text and "REPL output:" in text
    assert "x" * 200 not in text and "50,000 chars" in text
    assert len(text) <= 2_000


def test_transcript_drops_middle_turns_to_fit_the_cap():
    text = render_transcript(_trajectory(12, reply_chars=300), max_chars=1_200)
    assert len(text) <= 1_200
    assert "Turn 1:" in text and "SUBMIT(answer=7)" in text and "turns omitted" in text


def test_ranking_prefers_high_scores_then_short_runs_and_skips_failures():
    long_run = ScoredRun(_trajectory(5, question="a"), 1.0)
    short_run = ScoredRun(_trajectory(2, question="b"), 1.0)
    same_inputs = ScoredRun(_trajectory(3, question="b"), 1.0)
    failed = ScoredRun(_trajectory(1, question="c"), 0.0)
    ranked = rank_runs([long_run, failed, same_inputs, short_run])
    assert ranked == [short_run, long_run]


# ------------------------------------------------------------------ proposer parsing
def test_instructions_are_read_between_tags_deduplicated():
    text = (
        "Sure!\n<instruction> Look first. </instruction>\n<INSTRUCTION>Count.</INSTRUCTION>"
        "<instruction>Look first.</instruction><instruction>  </instruction>"
    )
    assert parse_instructions(text) == ["Look first.", "Count."]
    assert parse_instructions("no tags at all") == []


@pytest.mark.parametrize(
    "reply, instruction",
    [
        # what the embedded model wrote in the README's own optimisation table
        (
            "<instruction>To improve the instructions for the Recursive Language Model program, "
            "here is a revised version:\n\n1. Look at a few lines.\n2. Count with code.</instruction>",
            "1. Look at a few lines.\n2. Count with code.",
        ),
        (
            "<instruction>To improve the instructions for the Recursive Language Model, "
            "do this: Search first.</instruction>",
            "Search first.",
        ),
        (
            '<instruction>Sure! **Instruction 1:**\n"Print the count, then submit it."</instruction>',
            "Print the count, then submit it.",
        ),
        (
            "<instruction>To improve accuracy: use regex.</instruction>",
            "To improve accuracy: use regex.",
        ),  # the instruction itself
        ("<instruction>Here is the revised instruction:</instruction>", None),  # only a preamble: nothing
    ],
)
def test_only_the_instruction_is_kept_from_a_proposal(reply, instruction):
    assert parse_instructions(reply) == ([instruction] if instruction else [])


# ------------------------------------------------------------------ storage
def test_unreachable_storage_is_a_clear_config_error(tmp_path):
    with pytest.raises(
        ConfigError, match=r"cannot open study storage 'postgresql://user:\*\*\*@127.0.0.1:1/x'"
    ):
        open_storage("postgresql://user:secret@127.0.0.1:1/x", tmp_path)
    with pytest.raises(ConfigError, match="cannot open study storage"):
        open_storage("notadb://nowhere", tmp_path)
    assert redact("postgresql://u:pw@h/db") == "postgresql://u:***@h/db"


def test_default_storage_is_sqlite_beside_the_run(tmp_path):
    storage = open_storage(None, tmp_path / "run")
    optuna.create_study(storage=storage, study_name="s")
    assert (tmp_path / "run" / "study.db").exists()
    journal = open_storage(str(tmp_path / "j" / "study.journal"), tmp_path)
    optuna.create_study(storage=journal, study_name="s")
    assert (tmp_path / "j" / "study.journal").exists()
