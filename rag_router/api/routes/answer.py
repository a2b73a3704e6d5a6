"""``POST /v1/answer``: a grounded answer as JSON, or as an SSE stream (route, hits, token…, done | error)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from rag_router.answer.flow import AnswerParams
from rag_router.api.deps import STREAMED_RESPONSES, Svc, Tenant, answer_params
from rag_router.api.errors import error_response
from rag_router.api.schemas import AnswerRequest, AnswerResponse, SearchResponse
from rag_router.errors import RagError
from rag_router.services import Services

router = APIRouter()


@router.post("/v1/answer", response_model=AnswerResponse, responses=STREAMED_RESPONSES)
async def answer(body: AnswerRequest, request: Request, svc: Svc, tenant: Tenant) -> Any:
    params = answer_params(body, request, tenant, body.constraints, body.history)
    if not body.stream:
        result = await svc.answerer.answer(params)
        svc.metrics.answers.labels(mode=result.mode, degraded=str(result.degraded).lower()).inc()
        return AnswerResponse.from_answer(result)
    return EventSourceResponse(_answer_events(svc, params, request), ping=15)


async def _answer_events(
    svc: Services, params: AnswerParams, request: Request
) -> AsyncIterator[ServerSentEvent]:
    """route, hits, token…, done — or error (the envelope) if something fails after the start."""
    try:
        async for event, data in svc.answerer.events(params):
            if event == "route":
                yield ServerSentEvent(json.dumps(data.route_json(), ensure_ascii=False), event="route")
            elif event == "hits":
                hits = SearchResponse.from_outcome(data).model_dump()["hits"]
                yield ServerSentEvent(json.dumps(hits, ensure_ascii=False), event="hits")
            elif event == "token":
                yield ServerSentEvent(json.dumps({"text": data}, ensure_ascii=False), event="token")
            else:
                svc.metrics.answers.labels(mode=data.mode, degraded=str(data.degraded).lower()).inc()
                yield ServerSentEvent(AnswerResponse.from_answer(data).model_dump_json(), event="done")
    except RagError as exc:
        yield ServerSentEvent(bytes(error_response(request, exc).body).decode(), event="error")
