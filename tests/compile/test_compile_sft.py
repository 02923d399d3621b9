"""SFT compile: filters and their reasons, per-turn vs conversation samples, sub-calls, bad input."""

from __future__ import annotations

import json

import pytest

from optimizers.compile import (
    EmptyDatasetError,
    Filters,
    MixedSignaturesError,
    compile_sft,
    load_runs,
)
from rlmkit.testing.synthetic_runs import make_run, system_prompt
from rlmkit.trajectory import Message, TrajectoryLog


def runs_for(protocol="submit", n=6, **kw):
    return [make_run(protocol, task=f"ex{i}", variant=i, **kw) for i in range(n)]


@pytest.mark.parametrize("protocol", ["submit", "final", "answer"])
def test_each_root_turn_is_a_sample_with_the_exact_messages_the_model_saw(protocol):
    runs = runs_for(protocol, n=3, n_turns=4)
    result = compile_sft(runs)
    assert len(result.rows) == 3 * 4
    by_id = {row.id: row for row in result.rows}
    for run in runs:
        for turn in run.turns:
            row = by_id[f"{run.meta.run_id}:t{turn.index}"]
            seen = [m.model_dump(exclude_none=True) for m in row.prompt]
            assert seen == [m.model_dump() for m in run.turn_messages(turn.index)]
            assert row.completion[0].content == turn.reply and row.completion[0].role == "assistant"
            assert row.messages == row.prompt + row.completion
            assert row.task_id == f"records/{run.meta.task['example_id']}"


def test_conversation_mode_is_one_row_per_run_ending_with_the_final_reply():
    runs = runs_for("final", n=2, n_turns=3)
    rows = compile_sft(runs, mode="conversation").rows
    assert len(rows) == 2
    row = rows[0]
    assert [m.role for m in row.messages] == ["system", "user"] + ["assistant", "user"] * 2 + ["assistant"]
    assert row.completion[0].content == runs[0].turns[-1].reply and row.turn is None


def test_rewritten_history_cannot_be_one_conversation_but_turns_still_can():
    run = make_run("submit", n_turns=3)
    run.turns[2].keep = 1  # the root dropped part of its history before turn 2
    run.turns[2].new_messages = [Message(role="user", content="summary of earlier turns")]
    with pytest.raises(EmptyDatasetError, match="history_rewritten"):
        compile_sft([run], mode="conversation")
    rows = compile_sft([run]).rows
    assert [m.content for m in rows[2].prompt] == [system_prompt("submit"), "summary of earlier turns"]


def test_filters_count_what_they_remove_by_reason():
    runs = [
        make_run(task="a", score=1.0),
        make_run(task="b", score=0.0),  # zero_score
        make_run(task="c", score=0.4),  # min_score
        make_run(task="d", score=None),  # no_score
        make_run(task="e", score=1.0, n_turns=1),  # min_turns
        make_run(task="f", score=1.0).model_copy(update={"status": "max_iterations"}),  # status
    ]
    result = compile_sft(runs, filters=Filters(min_score=0.5))
    assert {row.task_id for row in result.rows} == {"records/a"}
    assert dict(result.report.runs_dropped) == {
        "zero_score": 1,
        "min_score": 1,
        "no_score": 1,
        "min_turns": 1,
        "status": 1,
    }
    assert result.report.runs_kept == 1 and result.report.runs_read == 6


def test_an_answer_right_only_because_it_holds_the_gold_somewhere_is_not_trained_on():
    """A suite that scores by containment scores a dump of the input right; SFT must not teach
    the dump. Rollouts keep it (a worse ending is data for DPO and RL)."""
    plain = make_run(task="plain")
    dump = make_run(task="dump")
    dump.outputs = {"answer": "record: alpha " * 20 + "42"}
    result = compile_sft([plain, dump])
    assert {row.task_id for row in result.rows} == {"records/plain"}
    assert dict(result.report.runs_dropped) == {"answer_padded": 1}
    kept = compile_sft([plain, dump], filters=Filters(max_answer_ratio=None))
    assert {row.task_id for row in kept.rows} == {"records/plain", "records/dump"}
    assert Filters.rollouts().max_answer_ratio is None
    with pytest.raises(ValueError, match="max_answer_ratio"):
        Filters(max_answer_ratio=0.5)


def test_a_right_answer_typed_in_before_any_output_showed_it_is_a_guess_not_trained_on():
    from rlmkit.trajectory import CodeBlock

    def ending(task: str, printed: str):
        run = make_run(task=task)
        run.turns[0].blocks = [CodeBlock(code="print(context[:500])", stdout=printed)]
        run.turns[-1].blocks = [CodeBlock(code="SUBMIT(answer=42)")]
        return run

    guessed, read = ending("guessed", "record: alpha 1420"), ending("read", "records: 42")
    decimal, sentence = ending("decimal", "the mean is 42.5"), ending("sentence", "The number is: 42. Then")
    result = compile_sft([guessed, read, decimal, sentence])
    # 1420 and 42.5 do not show 42; a sentence ending in it does
    assert {row.task_id for row in result.rows} == {"records/read", "records/sentence"}
    assert dict(result.report.runs_dropped) == {"answer_typed": 2}
    assert Filters.rollouts().drop_typed_answers is False  # a guess is a worse ending for DPO


def test_a_small_number_counts_as_read_only_on_a_short_line_of_output():
    """A count typed after printing a window of a file is a guess even when that window holds the
    digit somewhere, as it almost always does; a short line holding it is the count shown."""
    from rlmkit.trajectory import CodeBlock

    def ending(task: str, printed: str):
        run = make_run(task=task, answer=2)
        run.turns[0].blocks = [CodeBlock(code="print(repr(context[i - 150 : i + 150]))", stdout=printed)]
        run.turns[-1].blocks = [CodeBlock(code="SUBMIT(answer=2)")]
        return run

    window = repr("def lt(a, b):\n    return a < b\n\nclass fake_code:\n    co_argcount = 2\n" * 3)
    runs = [ending("window", window), ending("alone", "2"), ending("labelled", "methods defined: 2"),
            ending("counted", "2 methods")]  # fmt: skip
    result = compile_sft(runs)
    assert {row.task_id for row in result.rows} == {"records/alone", "records/labelled", "records/counted"}
    assert dict(result.report.runs_dropped) == {"answer_typed": 1}


def test_a_sentence_answer_restated_in_the_models_words_counts_as_read_when_its_gold_was_shown():
    from rlmkit.trajectory import CodeBlock

    gold = "security reports are answered within two working days"
    restated = (
        "The Wren project's maintainers agreed that security reports are answered within two working days."
    )

    def ending(task: str, printed: str):
        run = make_run(task=task, answer=restated)
        run.meta.task["gold"] = gold
        run.turns[0].blocks = [CodeBlock(code="print(context[i - 150 : i + 150])", stdout=printed)]
        run.turns[-1].blocks = [CodeBlock(code=f"SUBMIT(answer={restated!r})")]
        return run

    read = ending("read", f"A note on the Wren project: its maintainers agreed that {gold}.")
    guessed = ending("guessed", "Structure of a program: a block is a piece of Python program text.")
    result = compile_sft([read, guessed])
    assert {row.task_id for row in result.rows} == {"records/read"}
    assert dict(result.report.runs_dropped) == {"answer_typed": 1}


def test_one_example_id_at_two_lengths_is_two_examples():
    """A suite draws another example (another key, another gold) at each length under the same
    id: rows from both count as two examples, and the split may put them on different sides."""
    runs = [make_run(task="a"), make_run(task="a", variant=1), make_run(task="a", variant=2)]
    for run, length in zip(runs, (5_000, 5_000, 10_000)):
        run.meta.task["length"] = length
    result = compile_sft(runs)
    assert {row.task_id for row in result.rows} == {"records/a@5000", "records/a@10000"}
    assert make_run(task="a").meta.task.get("length") is None  # no length recorded: the id alone
    assert {row.task_id for row in compile_sft([make_run(task="a")]).rows} == {"records/a"}


def test_metric_scores_runs_that_have_no_score():
    runs = [make_run(task=f"t{i}", score=None, answer=i) for i in range(4)]
    result = compile_sft(runs, metric=lambda run: float(run.outputs["answer"] % 2))
    assert {row.task_id for row in result.rows} == {"records/t1", "records/t3"}
    assert {row.score for row in result.rows} == {1.0}


def test_per_task_cap_keeps_the_best_then_cheapest_runs():
    runs = [
        make_run(task="x", score=0.5, variant=1, cost=0.01),
        make_run(task="x", score=1.0, variant=2, cost=0.50),
        make_run(task="x", score=1.0, variant=3, cost=0.02),
    ]
    result = compile_sft(runs, filters=Filters(per_task_cap=1))
    assert {row.run_id for row in result.rows} == {runs[2].meta.run_id}
    assert result.report.runs_dropped["per_task_cap"] == 2


def test_dedupe_and_max_sample_chars_drop_samples():
    twins = [make_run(task="x", variant=0), make_run(task="x", variant=0)]  # identical turns
    result = compile_sft(twins)
    assert len(result.rows) == 3 and result.report.samples_dropped["duplicate"] == 3
    assert len(compile_sft(twins, filters=Filters(dedupe=False)).rows) == 6
    big = [make_run(task="y", n_turns=3)]
    limit = sum(len(m.content) for m in big[0].turn_messages(1)) + len(big[0].turns[1].reply)
    result = compile_sft(big, filters=Filters(max_sample_chars=limit))
    assert [row.turn for row in result.rows] == [0, 1]  # turn 2 carries more history
    assert result.report.samples_dropped["max_sample_chars"] == 1


def test_protocol_repair_and_rerender_are_reported():
    runs = [make_run("final", task="a", mistake="final_var_quoted"), make_run("final", task="b")]
    fixed = compile_sft(runs)
    assert fixed.report.fixes["final_var_quoted"] == 1
    assert fixed.rows[2].completion[0].content.endswith("FINAL_VAR(total)")
    submit = compile_sft(runs, protocol="submit")
    assert submit.report.fixes["converted:final->submit"] == 2
    system = submit.rows[0].prompt[0].content
    assert system == system_prompt("submit") and "FINAL" not in system
    assert all(
        row.meta["protocol"] == "submit" and row.meta["source_protocol"] == "final" for row in submit.rows
    )


def test_unrepairable_final_turn_is_dropped_with_its_reason():
    runs = [make_run("final", task="a", mistake="unclosed_final"), make_run("final", task="b", variant=1)]
    result = compile_sft(runs, protocol="submit")
    assert result.report.samples_dropped["unrepairable:final_unclosed"] == 1
    assert sorted((row.task_id, row.turn) for row in result.rows) == [
        ("records/a", 0),
        ("records/a", 1),
        ("records/b", 0),
        ("records/b", 1),
        ("records/b", 2),
    ]


def test_custom_system_prompt_replaces_the_root_prompt():
    rows = compile_sft(
        runs_for("answer", n=1), protocol="final", system_prompt=lambda run: f"Be brief. {run.meta.protocol}"
    ).rows
    assert {row.prompt[0].content for row in rows} == {"Be brief. answer"}


def test_subcall_samples_train_the_sub_model():
    runs = runs_for("submit", n=2, n_turns=3)
    runs[0].turns[0].blocks[0].subcalls[0].error = "TimeoutError"
    runs[1].turns[1].blocks[0].subcalls[0].prompt = "head\n... [9,000 characters cut] ...\ntail"
    typed = (
        runs[1]
        .turns[0]
        .blocks[0]
        .subcalls[0]
        .model_copy(update={"kind": "typed", "name": "classify", "id": "t1"})
    )
    typed.messages = [
        Message(role="system", content="Classify. Reply with JSON."),
        Message(role="user", content=typed.prompt),
    ]
    typed.reply = '{"label": "x"}'
    unparsed = typed.model_copy(update={"id": "t3", "reply": "label: x"})
    repair = typed.model_copy(update={"id": "t3r"})  # rlmkit's repair round after "label: x" failed to parse
    unlogged = typed.model_copy(update={"id": "t4", "messages": None})
    tool = typed.model_copy(update={"kind": "tool", "name": "search", "id": "t2"})
    runs[1].turns[0].blocks[0].subcalls += [typed, unparsed, repair, unlogged, tool]
    result = compile_sft(runs, subcalls=True)
    subs = [row for row in result.rows if row.meta["role"] == "subcall"]
    plain = [row for row in subs if row.meta["subcall"].startswith("llm_query")]
    assert len(plain) == 2  # 4 llm_query calls, one failed, one logged cut
    assert all(row.prompt[0].role == "user" and row.prompt[0].content.startswith("How many") for row in plain)
    typed_rows = [row for row in subs if row.meta["subcall"] == "typed:classify"]
    assert len(typed_rows) == 1  # the repaired call and its repair are alike (deduped); the unparsed one goes
    assert [m.role for m in typed_rows[0].prompt] == ["system", "user"]
    assert typed_rows[0].completion[0].content == '{"label": "x"}'
    dropped = result.report.samples_dropped
    assert dropped["subcall_failed"] == 1 and dropped["subcall_truncated"] == 1
    assert dropped["subcall_unparsed"] == 1 and dropped["subcall_request_not_logged"] == 1
    assert dropped["subcall_not_a_model_call"] == 1


def test_child_rlm_runs_become_samples_too():
    parent = make_run("submit", task="p")
    child = make_run("submit", task="p", n_turns=2, variant=9)
    call = parent.turns[0].blocks[0].subcalls[0]
    call.kind, call.child = "rlm_query", child
    rows = compile_sft([parent], subcalls=True).rows
    assert [row.meta["role"] for row in rows].count("child") == 2


def test_mixed_signatures_are_refused_naming_each():
    runs = [make_run(task="a"), make_run(task="b", signature="context -> summary: str")]
    with pytest.raises(MixedSignaturesError) as info:
        compile_sft(runs)
    assert "1 run(s) of 'context -> summary: str'" in str(info.value)
    assert "1 run(s) of 'context: str, question: str -> answer: int'" in str(info.value)
    # asked for, one dataset over both: a root model trained across tasks, each row its own prompt
    mixed = compile_sft(runs, mixed_signatures=True)
    assert {row.task_id for row in mixed.rows} == {"records/a", "records/b"}
    assert "context -> summary: str (1)" in mixed.report.signature


def test_truncated_jsonl_lines_are_skipped_and_counted_and_the_rest_kept(tmp_path):
    log = TrajectoryLog(tmp_path)
    paths = [log.write(run) for run in runs_for("submit", n=3)]
    with open(paths[0], "a", encoding="utf-8") as fh:
        fh.write('{"event": "turn", "turn": {"index": 9, "keep"')  # killed mid-write
    result = compile_sft(tmp_path)
    assert result.report.bad_lines == 1 and len(result.rows) == 9
    files = {file.path: file.bad_lines for file in load_runs(tmp_path).files}
    assert files == {str(path): int(path == paths[0]) for path in paths}


def test_no_run_passing_the_filters_says_which_filter_removed_what():
    runs = [make_run(task="a", score=0.0), make_run(task="b", score=0.0), make_run(task="c", n_turns=1)]
    with pytest.raises(EmptyDatasetError) as info:
        compile_sft(runs)
    message = str(info.value)
    assert "3 run(s) read" in message
    assert "runs: 2 removed by zero_score (score exactly 0.0)" in message
    assert "runs: 1 removed by min_turns" in message


def test_tokens_are_estimated_or_counted_with_a_tokenizer():
    runs = runs_for("submit", n=2)
    estimated = compile_sft(runs).report
    chars = sum(len(m.content) for row in compile_sft(runs).rows for m in row.messages)
    assert abs(estimated.tokens - chars / 4) <= len(compile_sft(runs).rows) * 4
    words = compile_sft(runs, tokenizer=lambda text: len(text.split())).report
    assert words.tokens == sum(len(m.content.split()) for row in compile_sft(runs).rows for m in row.messages)
    assert estimated.per_task == {"records/ex0": 3, "records/ex1": 3}
    assert json.loads(json.dumps(estimated.to_dict()))["tokens"]["total"] == estimated.tokens


def test_a_run_killed_before_its_end_line_is_dropped_by_status(tmp_path):
    log = TrajectoryLog(tmp_path)
    done, crashed = make_run(task="a"), make_run(task="b", variant=1)
    log.write(done)
    log.start(crashed.meta)  # the process died after one turn: no "end" line
    log.turn(crashed.meta.run_id, crashed.turns[0])
    result = compile_sft(tmp_path)
    assert result.report.runs_dropped == {"status": 1} and {row.run_id for row in result.rows} == {
        done.meta.run_id
    }


def test_a_cited_document_number_is_not_a_typed_answer_the_answer_field_is():
    """A multihop run submits its answer and the documents it cites: only the answer, the field
    the suites score, is judged for having been typed before any output showed it."""
    from rlmkit.trajectory import CodeBlock

    def ending(task: str, printed: str):
        run = make_run(task=task, answer="Tortorwick")
        run.outputs["citations"] = [2]
        run.turns[0].blocks = [CodeBlock(code="print(context[:500])", stdout=printed)]
        run.turns[-1].blocks = [CodeBlock(code="SUBMIT(answer='Tortorwick', citations=[2])")]
        return run

    read = ending("read", "[Doc 002] Teruvel Press\nIts mayor was born in Tortorwick.")
    guessed = ending("guessed", "[Doc 001] Fenwick Tortorzur was born in Rislotormere.")
    result = compile_sft([read, guessed])
    assert {row.task_id for row in result.rows} == {"records/read"}
    assert dict(result.report.runs_dropped) == {"answer_typed": 1}
