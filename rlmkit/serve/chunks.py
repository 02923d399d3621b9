"""The name ``rlmkit.serve.mcp_tool`` still imports the run's shown text by; the module is
``rlmkit.serve.reasoning``."""

from rlmkit.serve.reasoning import reasoning_of

__all__ = ["reasoning_of"]
