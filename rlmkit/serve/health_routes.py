"""The operator's routes: ``GET /health``, ``/health/live`` and ``/health/ready`` (no key: a load
balancer asks them) and ``GET /metrics`` (``keyed``: behind the API key). What they report is
``operations.py``'s."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from starlette.responses import JSONResponse, Response

from rlmkit.serve.http import openai_errors
from rlmkit.serve.state import ServeState, serving

open_router = APIRouter()
keyed = APIRouter()


@open_router.get("/health")
@openai_errors
async def health(state: ServeState = Depends(serving)) -> dict[str, Any]:
    return {
        "status": "ok",
        **state.readiness.describe(),
        "running": state.admission.running,
        "waiting": state.admission.waiting,
        "sessions": len(state.sessions.live),
    }


@open_router.get("/health/live")
async def live() -> dict[str, Any]:
    return {"status": "ok"}


@open_router.get("/health/ready")
async def ready(state: ServeState = Depends(serving)) -> Response:
    return JSONResponse(state.readiness.describe(), status_code=200 if state.readiness.ready else 503)


@keyed.get("/metrics")
@openai_errors
async def scrape(state: ServeState = Depends(serving)) -> Response:
    body, content_type = state.metrics.render()
    return Response(body, media_type=content_type)
