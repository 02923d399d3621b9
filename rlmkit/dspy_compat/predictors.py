"""dspy.RLM's two predictors, as an rlmkit.RLM shows them, and a saved dspy.RLM's state.

rlmkit has one optimizable predictor, ``root`` (the task's instructions and demos). A DSPy
program reaches for dspy.RLM's ``generate_action`` (one REPL step: variables_info,
repl_history, iteration -> reasoning, code) and ``extract`` (the outputs from the history when
the iterations run out). Read, they are built from ``root`` for this signature; set, a
``generate_action`` replaces the root model for the action step (``ActionLM``: what it returns
is run as that step's code), which is how DSPy's tests script an RLM.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import dspy

from rlmkit.models.contract import Completion, ModelTraits, settings_free_description
from rlmkit.trajectory import ChatMessage

log = logging.getLogger("rlmkit")

ACTION_RULES = """You have a Python REPL. Variables: {inputs}.
Write Python code; you see its output, then write more.
- `llm_query(prompt)` / `llm_query_batched(prompts)` ask a sub-LLM; `print()` to see results.
- `SUBMIT({outputs})` when done (outputs: {output_fields})."""


def action_signature(signature: type[dspy.Signature], instructions: str, factory: Any = None) -> Any:
    inputs = ", ".join(f"`{name}`" for name in signature.input_fields)
    outputs = ", ".join(signature.output_fields)
    rules = ACTION_RULES.format(
        inputs=inputs, outputs=outputs, output_fields=", ".join(f"`{n}`" for n in signature.output_fields)
    )
    runtime = getattr(factory, "execution_instructions", None)
    text = "\n\n".join(part for part in (instructions, rules, runtime) if part)
    return (
        dspy.Signature({}, text)
        .append("variables_info", dspy.InputField(desc="the REPL's variables"), type_=str)
        .append("repl_history", dspy.InputField(desc="earlier code and its output"), type_=str)
        .append("iteration", dspy.InputField(desc="this step, 1-indexed, of max_iters"), type_=str)
        .append("reasoning", dspy.OutputField(desc="what is known, what remains, the next step"), type_=str)
        .append("code", dspy.OutputField(desc="Python code to run"), type_=str)
    )


def extract_signature(signature: type[dspy.Signature], instructions: str) -> Any:
    text = "From the REPL history, give the final outputs now." + (
        f"\n\nThe task: {instructions}" if instructions else ""
    )
    return (
        dspy.Signature(dict(signature.output_fields), text)
        .prepend("repl_history", dspy.InputField(desc="the REPL steps so far"), type_=str)
        .prepend("variables_info", dspy.InputField(desc="the REPL's variables"), type_=str)
    )


class ActionLM:
    """A ``generate_action`` predictor standing in for the root model: each turn it is called
    with dspy.RLM's action inputs, and its ``reasoning`` and ``code`` become the turn's reply."""

    traits = ModelTraits(observed_by_dspy=True)  # a predictor reports to DSPy's callbacks itself

    def __init__(self, predictor: Any, max_iterations: int):
        self.predictor, self.max_iterations = predictor, max_iterations
        self.model = f"predictor/{type(predictor).__name__}"
        self.turn = 0

    def describe(self) -> dict:
        return settings_free_description(self.model, "predictor")

    async def acomplete(self, messages: list[ChatMessage], **_: Any) -> Completion:
        started = time.perf_counter()
        self.turn += 1
        inputs = {
            "variables_info": messages[1]["content"] if len(messages) > 1 else messages[0]["content"],
            "repl_history": "\n\n".join(m["content"] for m in messages[2:]),
            "iteration": f"{self.turn}/{self.max_iterations}",
        }
        acall = getattr(self.predictor, "acall", None)
        prediction = await acall(**inputs) if acall is not None else self.predictor(**inputs)
        code = prediction.code if "```" in prediction.code else f"```repl\n{prediction.code}\n```"
        text = f"{getattr(prediction, 'reasoning', '')}\n\n{code}".strip()
        return Completion.timed(text, self.model, started)


EXTRACTED = "Extract forced final output"  # dspy.RLM's final_reasoning when extract answered


async def extract_outputs(predictor: Any, trajectory: Any, validator: Any) -> dict[str, Any]:
    """The outputs a set ``extract`` predictor gives from the run's steps, checked by the signature."""
    steps = "\n\n".join(
        f"Step {i + 1}\nReasoning: {s['reasoning']}\nCode:\n{s['code']}\nOutput:\n{s['output']}"
        for i, s in enumerate(trajectory.steps())
    )
    variables = ", ".join(f"{v.name}: {v.type} ({v.size})" for v in trajectory.meta.inputs)
    acall = getattr(predictor, "acall", None)
    kwargs = {"variables_info": variables, "repl_history": steps}
    prediction = await acall(**kwargs) if acall is not None else predictor(**kwargs)
    return validator.validate({name: getattr(prediction, name, None) for name in validator.fields})


def root_state_from_dspy(state: dict[str, Any], signature: type[dspy.Signature]) -> dict[str, Any]:
    """A saved dspy.RLM's ``generate_action`` state as the root predictor's state.

    Its instructions, if tuned (anything but what dspy.RLM writes for this signature), become
    the root's; demos land if their fields are this signature's. What cannot map is logged:
    ``extract`` (rlmkit asks the model itself for the outputs when iterations run out) and
    action-step demos (a dspy.RLM step's fields are not a task's)."""
    action = state["generate_action"]
    saved = (action.get("signature") or {}).get("instructions")
    instructions = tuned_instructions(saved, signature)
    fields = {*signature.input_fields, *signature.output_fields}
    demos = [d for d in action.get("demos", []) if isinstance(d, dict) and set(d) - {"augmented"} <= fields]
    dropped = len(action.get("demos", [])) - len(demos)
    if dropped or state.get("extract", {}).get("demos"):
        log.warning(
            "rlmkit: loading a dspy.RLM program: %d action-step demo(s) and the extract predictor's "
            "demos do not map onto rlmkit's root predictor and were left out",
            dropped,
        )
    return {
        "traces": [],
        "train": [],
        "demos": demos,
        "lm": None,
        "signature": {"instructions": instructions or signature.instructions, "fields": []},
    }


def tuned_instructions(saved: str | None, signature: type[dspy.Signature]) -> str | None:
    """The instructions to keep from a dspy.RLM's action step: None when untouched, the task part
    when only it differs, else the whole tuned text."""
    if not saved:
        return None
    try:
        pristine = dspy.RLM(signature).generate_action.signature.instructions
    except Exception:  # noqa: BLE001 - an older or newer dspy.RLM: keep the saved text whole
        return saved
    task = signature.instructions or ""
    template = pristine[len(f"{task}\n\n") :] if task and pristine.startswith(task) else pristine
    if saved == pristine:
        return None
    if saved.endswith(template):
        return saved[: -len(template)].strip() or None
    return saved
