"""Liveness, readiness (each backend pinged) and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from rag_router.api.deps import Svc

router = APIRouter()


@router.get("/healthz", summary="Liveness")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness")
async def readyz(request: Request, svc: Svc) -> JSONResponse:
    backends: dict[str, dict[str, Any]] = {}
    counts = not request.app.state.keys.enabled  # a count spans tenants: not for anyone to read
    for name, tier in svc.tiers.items():
        ok = await tier.ping()
        backends[name] = {"ok": ok, "engine": tier.engine}
        if counts:
            backends[name]["chunks"] = await tier.count() if ok else None
    backends["llm"] = {
        "ok": True,
        "engine": "extractive" if not svc.settings.llm.base_url else "openai-compatible",
    }
    backends["embedder"] = {"ok": True, "engine": svc.embedder.model_name}
    ready = all(b["ok"] for b in backends.values())
    body = {"status": "ready" if ready else "unavailable", "backends": backends}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(svc: Svc) -> Response:
    return PlainTextResponse(svc.metrics.render(), media_type="text/plain; version=0.0.4")
