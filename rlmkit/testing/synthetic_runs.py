"""Realistic synthetic RLM runs for tests and benchmarks (no model, no sandbox).

Each run looks like what ``rlmkit.RLM`` logs: the protocol's own system prompt, a task
message, REPL feedback turns with ``llm_query`` sub-calls, and a last reply that ends the
run the protocol's way, optionally with one of the templated mistakes repair must fix.
"""

from __future__ import annotations

from typing import Literal

from rlmkit.protocols import REPL_PROMPT, get_protocol
from rlmkit.run.describe import describe_variable
from rlmkit.trajectory import (
    CodeBlock,
    Message,
    RunMeta,
    SubCall,
    Trajectory,
    Turn,
    Usage,
)

SIGNATURE = "context: str, question: str -> answer: int"
Mistake = (
    Literal[
        "final_var_quoted",
        "final_trailing_text",
        "both_final_forms",
        "final_in_code",
        "submit_positional",
        "submit_outside_code",
        "unclosed_final",
    ]
    | None
)


def system_prompt(protocol: str) -> str:
    return REPL_PROMPT.format(
        functions="- llm_query(prompt: str) -> str: ask a sub-model one question.",
        finish=get_protocol(protocol).render_finish({"answer": "int"}),
    )


def final_reply(protocol: str, answer: int, mistake: Mistake = None) -> str:
    """The run's last reply: compute ``total`` in code, then end the protocol's way."""
    code = f"total = sum(counts)  # {answer}"
    if protocol == "submit":
        if mistake == "submit_positional":
            return f"Counting done.\n```repl\n{code}\nSUBMIT(total)\n```"
        if mistake == "submit_outside_code":
            return f"```repl\n{code}\n```\nSUBMIT(answer=total)"
        return f"Counting done.\n```repl\n{code}\nSUBMIT(answer=total)\n```"
    if protocol == "answer":
        return f'```repl\n{code}\nanswer["content"] = total\nanswer["ready"] = True\n```'
    endings = {
        None: "FINAL_VAR(total)",
        "final_var_quoted": 'FINAL_VAR("total")',
        "final_trailing_text": f"FINAL({answer}) That is the number of matching records.",
        "both_final_forms": f"FINAL({answer})\nFINAL_VAR(total)",
        "unclosed_final": f"FINAL(about {answer} (rough",
    }
    if mistake == "final_in_code":
        return f"```repl\n{code}\nFINAL_VAR(total)\n```"
    return f"The total is ready.\n```repl\n{code}\n```\n{endings[mistake]}"


def make_run(
    protocol: str = "submit",
    *,
    task: str = "ex0",
    score: float | None = 1.0,
    n_turns: int = 3,
    answer: int = 42,
    mistake: Mistake = None,
    variant: int = 0,
    cost: float = 0.01,
    signature: str = SIGNATURE,
    context_chars: int = 5_000,
) -> Trajectory:
    """One finished run of ``n_turns`` root turns (the last one ends the run)."""
    context = ("record: alpha\n" * (context_chars // 14 + 1))[:context_chars]
    question = f"How many records in {task}?"  # each task asks its own question
    meta = RunMeta(
        signature=signature,
        protocol=protocol,
        sandbox="process",
        model="openai/teacher",
        sub_model="openai/student",
        inputs=[describe_variable("context", context), describe_variable("question", question)],
        task={
            "suite": "records",
            "example_id": task,
            "gold": answer,
            "knobs": {"n_records": context_chars // 14},
            "scorer": "programs.tasks.records:score",
        },
    )
    task_text = (
        "Your inputs are loaded in the REPL as variables:\n"
        f"- `context` (str, {len(context):,} characters). Preview: {context[:40]!r}\n"
        f"- `question` (str, {len(question)} characters): {question!r}\n\nProduce: `answer`: int.\n"
        f"You have 10 turns. Start by exploring the inputs with code."
    )
    turns: list[Turn] = []
    length = 0
    for index in range(n_turns):
        last = index == n_turns - 1
        if index == 0:
            new = [
                Message(role="system", content=system_prompt(protocol)),
                Message(role="user", content=task_text),
            ]
        else:
            new = [
                Message(
                    role="user",
                    content=f"REPL output:\nchunk {index - 1}: {variant + index} matches\n\n"
                    f"[turn {index} of 10 done]",
                )
            ]
        if last:
            reply = final_reply(protocol, answer, mistake)
            blocks = [CodeBlock(code="total = sum(counts)")]
        else:
            reply = (
                f"Step {index} (try {variant}): read chunk {index}.\n```repl\nchunk = context[{index} * 1000:"
                f"{index + 1} * 1000]\ncounts.append(int(llm_query(f'How many records in: {{chunk}}')))\n```"
            )
            call = SubCall(
                kind="llm_query",
                name="llm_query",
                model="openai/student",
                prompt=f"How many records in: {context[index * 1000 : (index + 1) * 1000]}",
                reply=str(variant + index),
                usage=Usage(calls=1, prompt_tokens=250, completion_tokens=1),
            )
            blocks = [CodeBlock(code="chunk = ...", stdout="", subcalls=[call])]
        turns.append(
            Turn(
                index=index,
                keep=length,
                new_messages=new,
                reply=reply,
                blocks=blocks,
                final=last,
                usage=Usage(calls=1, prompt_tokens=400 * (index + 1), completion_tokens=40),
            )
        )
        length += len(new) + 1
    return Trajectory(
        meta=meta,
        turns=turns,
        outputs={"answer": answer},
        status="ok",
        score=score,
        usage=Usage(
            calls=2 * n_turns, prompt_tokens=1000 * n_turns, completion_tokens=50 * n_turns, cost=cost
        ),
    )
