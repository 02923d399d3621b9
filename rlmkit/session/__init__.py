"""Sessions: many calls of one RLM over inputs loaded once, with the REPL's variables kept
between calls and checkpointed after each (see ``session.py``; the directory format is
``store.py``'s)."""

# What a session does to each input (the CLI loads files with it), and the client's tools a
# started run takes (serving hands them over): the faces reach the run through here.
from rlmkit.run.client_tools import ClientTool, PendingToolCall, client_tools
from rlmkit.run.inputs import load_input
from rlmkit.session.session import Session

__all__ = ["ClientTool", "PendingToolCall", "Session", "client_tools", "load_input"]
