"""Test helpers that ship with rlmkit: an in-process model, a switch that refuses real model
requests, and a scripted OpenAI-compatible server on 127.0.0.1."""

from rlmkit.models.lm import FunctionLM
from rlmkit.models.transports.base import ModelReply, ModelRequest, ProviderError
from rlmkit.models.transports.function import (
    ModelRequestsBlocked,
    block_model_requests,
    model_requests_allowed,
    set_model_requests_allowed,
)
from rlmkit.testing.server import Faults, ScriptedServer, chat_response, is_root_request, last_user_text

__all__ = [
    "Faults",
    "FunctionLM",
    "ModelReply",
    "ModelRequest",
    "ModelRequestsBlocked",
    "ProviderError",
    "ScriptedServer",
    "block_model_requests",
    "chat_response",
    "is_root_request",
    "last_user_text",
    "model_requests_allowed",
    "set_model_requests_allowed",
]
