"""A scripted model's replies, for the scripted server of ``rlmkit.testing``: the root's by turn, the
sub-calls' by prompt."""

from __future__ import annotations

from rlmkit.testing import is_root_request, last_user_text


def root_turn(body: dict) -> int:
    """How many assistant turns the root has had before this request."""
    return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")


class Script:
    """A scripted model: ``root`` replies by turn index (str or callable(body) -> str);
    ``sub(prompt) -> str`` answers sub-calls (default: echo a short answer)."""

    def __init__(self, root, sub=None):
        self.root = root
        self.sub = sub or (lambda prompt: "sub-answer")

    def __call__(self, body: dict):
        if is_root_request(body):
            replies = self.root(body) if callable(self.root) else self.root
            if isinstance(replies, str):
                return replies
            turn = root_turn(body)
            return replies[min(turn, len(replies) - 1)]
        return self.sub(last_user_text(body))
