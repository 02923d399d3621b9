"""Sessions: many calls of one RLM over inputs loaded once, with the REPL's variables kept
between calls and checkpointed after each (see ``session.py``; the directory format is
``store.py``'s)."""

from rlmkit.run.inputs import load_input  # what a session does to each input: the CLI loads files with it
from rlmkit.session.session import Session

__all__ = ["Session", "load_input"]
