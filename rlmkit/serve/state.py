"""What the routes share, made once per app: its options, the admission queue, the sessions, the
responses kept, readiness and metrics, and the program once it is loaded. The app keeps it as
``app.state.serve``; a route takes it as a dependency (``Depends(serving)``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from rlmkit.serve.admission import Admission
from rlmkit.serve.openai.background import DEFAULT_RUNNING, DEFAULT_WAITING, BackgroundResponses
from rlmkit.serve.openai.stored import MAX_STORED, StoredResponses
from rlmkit.serve.operations import Metrics, Readiness
from rlmkit.serve.program import Program
from rlmkit.serve.sessions import Sessions

MAX_BODY_BYTES = 64 * 2**20  # a long context is the point; a body past this is a 413


@dataclass(frozen=True)
class ServeOptions:
    """Everything the app can be told; ``rlmkit serve``'s flags are these."""

    api_key: str | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    max_running: int = 16
    max_waiting: int = 64
    sessions_dir: str | None = None
    session_idle_timeout: float | None = 900.0
    max_sessions: int = 64
    max_stored_responses: int = MAX_STORED
    background_runs: int = DEFAULT_RUNNING  # background responses running at once
    background_queue: int = DEFAULT_WAITING  # background responses waiting for one of them


@dataclass
class ServeState:
    options: ServeOptions
    admission: Admission
    sessions: Sessions
    readiness: Readiness
    metrics: Metrics
    kept: StoredResponses
    background: BackgroundResponses
    served: dict[str, Program] = field(default_factory=dict)

    @classmethod
    def made(cls, options: ServeOptions) -> ServeState:
        admission = Admission(options.max_running, options.max_waiting)
        sessions = Sessions(
            None,
            directory=options.sessions_dir,
            idle_timeout=options.session_idle_timeout,
            max_live=options.max_sessions,
        )
        readiness = Readiness()
        metrics = Metrics(admission, sessions, readiness)
        kept = StoredResponses(options.max_stored_responses)
        background = BackgroundResponses(options.background_runs, options.background_queue)
        return cls(options, admission, sessions, readiness, metrics, kept, background)

    def serve(self, program: Program) -> None:
        self.served["program"], self.sessions.rlm = program, program.rlm
        self.readiness.loaded()

    def program(self) -> Program:
        """The program, once loaded (a 503 until then, or after its load failed)."""
        self.readiness.check()
        return self.served["program"]


def serving(request: Request) -> ServeState:
    state: ServeState = request.app.state.serve
    return state


def loaded_program(request: Request) -> Program:
    """The served program, as a route's dependency."""
    return serving(request).program()
