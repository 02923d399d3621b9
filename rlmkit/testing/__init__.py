"""Test helpers that ship with rlmkit: a scripted OpenAI-compatible server on 127.0.0.1."""

from rlmkit.testing.server import Faults, ScriptedServer, chat_response, is_root_request, last_user_text

__all__ = ["Faults", "ScriptedServer", "chat_response", "is_root_request", "last_user_text"]
