"""The paper's baseline: the plain LM reads the whole context in its prompt, cut to its window.

The window is the model's own (``window_tokens_of``): the embedded model's server context, or
``max_input_tokens`` from litellm's model map; ``window_tokens=`` overrides it. Cutting every
model at one fixed size would hand a 128k-token model a quarter of what it can read.

One call, no REPL. The reply is parsed into the signature's outputs (a JSON object when
there are several, the bare text otherwise) and the run is recorded as a one-turn
trajectory, so evaluation logs, scores and prices it exactly like an RLM run.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import dspy

import rlmkit
from rlmkit.model_choice import resolve_lm
from rlmkit.model_choice import window_tokens_of as model_window
from rlmkit.run.describe import describe_variable
from rlmkit.signature import OutputValidator, describe_outputs, make_signature, signature_text
from rlmkit.trajectory import Message, RunMeta, Trajectory, Turn

CHARS_PER_TOKEN = 4  # a rough, provider-neutral rule for sizing the cut
TRUNCATION_NOTE = "\n[... the rest of the context was cut to fit the model's window ...]"


def window_tokens_of(lm: rlmkit.LM) -> int:
    """The context window of ``lm``'s model, in tokens (``rlmkit.model_choice.window_tokens_of``);
    a clear error when nothing knows it, before any model call."""
    window = model_window(lm)
    if window is not None:
        return window
    raise rlmkit.errors.UserError(
        f"the context window of {lm.model!r} is not in litellm's model map: give the baseline one "
        "(BaselineLM(..., window_tokens=N), rlmkit eval --window-tokens N)"
    )


class BaselineLM(dspy.Module):
    def __init__(self, signature: Any, *, lm: Any = None, window_tokens: int | None = None):
        super().__init__()
        if window_tokens is not None and (not isinstance(window_tokens, int) or window_tokens < 256):
            raise rlmkit.errors.UserError(f"window_tokens must be an int >= 256, got {window_tokens!r}")
        self.signature = make_signature(signature)
        self.validator = OutputValidator(self.signature)
        self._lm_spec = lm
        self.window_tokens = window_tokens if window_tokens is not None else window_tokens_of(resolve_lm(lm))

    def messages(self, inputs: dict[str, Any]) -> list[dict[str, str]]:
        """System + user messages with every input inline; the longest one cut to the window."""
        budget = self.window_tokens * CHARS_PER_TOKEN - 2_000  # room for the question and the reply
        longest = max(inputs, key=lambda k: len(str(inputs[k])))
        parts = []
        for name, value in inputs.items():
            text = str(value)
            if name == longest and len(text) > budget:
                text = text[:budget] + TRUNCATION_NOTE
            parts.append(f"{name}:\n{text}")
        outputs = describe_outputs(self.signature)
        if len(outputs) == 1:
            name, desc = next(iter(outputs.items()))
            want = f"Reply with only the {name} ({desc}), nothing else."
        else:
            want = "Reply with only a JSON object with these keys: " + "; ".join(
                f'"{k}": {v}' for k, v in outputs.items()
            )
        system = f"{self.signature.instructions.strip()}\n{want}"
        return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]

    def parse(self, text: str) -> dict[str, Any]:
        fields = self.validator.fields
        raw: dict[str, Any]
        if len(fields) == 1:
            raw = {fields[0]: text.strip().strip("`").strip()}
        else:
            match = re.search(r"\{.*\}", text, re.DOTALL)
            try:
                raw = json.loads(match.group(0)) if match else {}
            except ValueError:
                raw = {}
            raw = {k: raw.get(k) for k in fields} if raw else {fields[0]: text.strip()}
        attempts = [raw]
        if len(fields) == 1:  # a list field answered with bare text: one item per line
            attempts.append(
                {fields[0]: [line.strip() for line in raw[fields[0]].splitlines() if line.strip()]}
            )
        for attempt in attempts:
            try:
                return self.validator.validate({k: v for k, v in attempt.items() if v is not None})
            except ValueError:
                continue
        return {k: raw.get(k) for k in fields}  # keep what the model said: the scorer decides its worth

    def forward(self, **inputs: Any) -> dspy.Prediction:
        lm = resolve_lm(self._lm_spec)
        messages = self.messages(inputs)
        meta = RunMeta(
            signature=signature_text(self.signature),
            instructions=self.signature.instructions,
            protocol="baseline",
            sandbox="none",
            model=lm.model,
            limits={"window_tokens": self.window_tokens},
            inputs=[describe_variable(k, v) for k, v in inputs.items()],
            rlmkit_version=rlmkit.__version__,
        )
        started = time.monotonic()
        completion = lm.complete(messages)
        outputs = self.parse(completion.text)
        duration = time.monotonic() - started
        # the trajectory keeps the system prompt and a bounded user message, never the context body
        kept = [
            Message(role="system", content=messages[0]["content"]),
            Message(role="user", content=f"[{len(messages[1]['content']):,} characters of inputs]"),
        ]
        turn = Turn(
            index=0,
            keep=0,
            new_messages=kept,
            reply=completion.text,
            model=completion.model,
            usage=completion.usage,
            duration_s=duration,
            lm_duration_s=duration,
            final=True,
        )
        trajectory = Trajectory(
            meta=meta, turns=[turn], outputs=outputs, status="ok", usage=completion.usage, duration_s=duration
        )
        return dspy.Prediction(**outputs, trajectory=trajectory)
