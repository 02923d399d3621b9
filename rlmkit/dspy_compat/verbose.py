"""``verbose=True``: each step of a run through ``logging`` (logger ``rlmkit``, level INFO), as
dspy.RLM logs its iterations. A listener on the run's events, attached only to call trees whose
spec is verbose."""

from __future__ import annotations

import logging

from rlmkit import events as ev

log = logging.getLogger("rlmkit")


def verbose_listener(start: ev.RunStarted) -> ev.Listener | None:
    if not getattr(start.spec, "verbose", False):
        return None

    def listen(event: ev.Event) -> None:
        if type(event) is ev.TurnFinished:
            turn = event.turn
            code = "\n".join(block.code for block in turn.blocks)
            output = "\n".join(
                block.stdout + (f"\n[Error] {block.error}" if block.error else "") for block in turn.blocks
            )
            log.info(
                "RLM step %d\nreply:\n%s\ncode:\n%s\noutput:\n%s", turn.index + 1, turn.reply, code, output
            )

    return listen


ev.instrument(verbose_listener)
