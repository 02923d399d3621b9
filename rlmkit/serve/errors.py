"""Errors in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``, with the status
code each kind of failure gets. The openai SDK turns these into its own exception classes
(400 ``BadRequestError``, 401 ``AuthenticationError``, 404 ``NotFoundError``, ...), so a client
handles a served RLM's errors the way it handles any provider's.

    400 malformed JSON, unknown or unsupported fields
    401 missing or wrong API key
    404 unknown model, session or response
    409 a session already running a call
    413 body over the limit
    422 inputs that do not fit the signature
    429 queue or session cap full (with Retry-After)
    502 the model failed, or the run ended without an answer
    503 the sandbox could not run, the program is still loading, or the server is stopping
    500 only for a bug of the server itself
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import JSONResponse

from rlmkit import errors

log = logging.getLogger("rlmkit.serve")


class APIError(Exception):
    """A failure the client is told about, with its status, OpenAI error type and code."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",  # noqa: A002 - OpenAI's field name
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def bad_request(message: str, param: str | None = None, code: str = "invalid_request") -> APIError:
    return APIError(400, message, param=param, code=code)


def from_exception(exc: BaseException) -> APIError:
    """The client's view of what a call raised. Anything not listed is a bug of ours: a 500 that
    says nothing of the internals (the traceback goes to the log, the prompt never does)."""
    if isinstance(exc, APIError):
        return exc
    message = str(exc)
    if isinstance(exc, errors.SessionBusyError):
        return APIError(409, message, code="session_busy", param="session")
    if isinstance(exc, errors.SessionClosedError):
        return APIError(404, message, code="session_not_found", param="session")
    if isinstance(exc, errors.LMError):  # a provider down, or the server's own model misconfigured
        return APIError(502, f"the model failed: {message}", type="model_error", code="model_error")
    if isinstance(exc, errors.UserError):  # missing, unexpected or unusable inputs
        return APIError(422, message, code="invalid_inputs", param="inputs")
    if isinstance(exc, errors.SandboxError):
        return APIError(503, message, type="server_error", code="sandbox_unavailable")
    if isinstance(exc, errors.RunError):
        code = "budget_exceeded" if isinstance(exc, errors.BudgetExceeded) else "run_failed"
        return APIError(502, f"the run ended without an answer: {message}", type="run_error", code=code)
    log.error("rlmkit serve: unexpected %s", type(exc).__name__, exc_info=exc)
    return APIError(500, "internal server error", type="server_error", code="internal_error")
