"""``POST /v1/answer`` (JSON or SSE) and ``POST /v1/chat/completions`` (OpenAI-compatible)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse, ServerSentEvent

from rag_router.answer.flow import AnswerOutcome, AnswerParams
from rag_router.answer.prompting import Constraints
from rag_router.api.errors import ERROR_RESPONSES, error_response
from rag_router.api.routes import Svc, Tenant, search_params
from rag_router.api.schemas import SearchRequest, SearchResponse
from rag_router.errors import InvalidRequest, RagError

router = APIRouter()


class ConstraintsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_words: int | None = Field(None, ge=1, le=5000)
    max_chars: int | None = Field(None, ge=1, le=20000)
    max_sentences: int | None = Field(None, ge=1, le=200)
    format: Literal["text", "bullets", "json"] | None = None
    json_schema: dict[str, Any] | None = Field(None, description="JSON schema for vLLM guided decoding")
    language: str | None = Field(None, max_length=8)

    def domain(self) -> Constraints:
        fields = tuple((self.json_schema or {}).get("properties", {}))
        return Constraints(
            max_words=self.max_words,
            max_chars=self.max_chars,
            max_sentences=self.max_sentences,
            format=self.format or ("json" if self.json_schema else "text"),
            json_fields=fields,
            language=self.language,
        )


class AnswerRequest(SearchRequest):
    top_k: int = Field(5, ge=1, le=100, description="hits to return (and the sources the model sees)")
    stream: bool = False
    constraints: ConstraintsIn | None = None


class Citation(BaseModel):
    n: int
    chunk_id: str
    doc_id: str


class AnswerResponse(SearchResponse):
    answer: str | None
    answer_json: dict[str, Any] | None
    citations: list[Citation]
    mode: Literal["llm", "extractive"]
    finish_reason: str | None
    usage: dict[str, int] | None
    notes: list[str] = Field(default_factory=list, description="what could not be done as asked, and why")

    @classmethod
    def from_answer(cls, result: AnswerOutcome) -> AnswerResponse:
        search = SearchResponse.from_outcome(result.search)
        return cls(
            **search.model_dump(exclude={"degraded"}),
            degraded=result.degraded,
            answer=result.answer,
            answer_json=result.answer_json,
            citations=[Citation(**c) for c in result.citations],
            mode=result.mode,
            finish_reason=result.finish_reason,
            usage=result.usage,
            notes=result.notes,
        )


def _params(
    body: SearchRequest, request: Request, tenant: str, constraints: ConstraintsIn | None
) -> AnswerParams:
    return AnswerParams(
        search=search_params(body, request, tenant),
        constraints=constraints.domain() if constraints else None,
        schema=constraints.json_schema if constraints else None,
        sources=min(body.top_k, request.app.state.settings.llm.sources),
    )


@router.post("/v1/answer", response_model=AnswerResponse, responses=ERROR_RESPONSES)
async def answer(body: AnswerRequest, request: Request, svc: Svc, tenant: Tenant) -> Any:
    params = _params(body, request, tenant, body.constraints)
    if not body.stream:
        result = await svc.answerer.answer(params)
        svc.metrics.answers.labels(mode=result.mode, degraded=str(result.degraded).lower()).inc()
        return AnswerResponse.from_answer(result)
    return EventSourceResponse(_answer_events(svc, params, request), ping=15)


async def _answer_events(svc: Any, params: AnswerParams, request: Request) -> AsyncIterator[ServerSentEvent]:
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


# OpenAI-compatible chat ------------------------------------------------------------------------


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    """The fields of OpenAI's request that matter here; others (temperature, …) are accepted and ignored."""

    model_config = ConfigDict(extra="allow")
    model: str = "rag-router"
    messages: list[ChatMessage] = Field(..., min_length=1)
    stream: bool = False
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)


def _last_user_text(body: ChatRequest) -> str:
    for message in reversed(body.messages):
        if message.role != "user":
            continue
        if isinstance(message.content, str):
            text = message.content
        else:
            text = " ".join(p.get("text", "") for p in message.content or [] if p.get("type") == "text")
        if text.strip():
            return text
    raise InvalidRequest("no user message with text content")


def _rag_extension(result: AnswerOutcome) -> dict[str, Any]:
    search = SearchResponse.from_outcome(result.search)
    sources = [{"n": c["n"], "chunk_id": c["chunk_id"], "doc_id": c["doc_id"]} for c in result.citations]
    return {
        "sources": sources,
        "hits": [h.model_dump(include={"chunk_id", "doc_id", "title", "score", "tier"}) for h in search.hits],
        "route": search.route.model_dump(),
        "mode": result.mode,
        "degraded": result.degraded,
    }


@router.post("/v1/chat/completions", responses=ERROR_RESPONSES)
async def chat_completions(body: ChatRequest, request: Request, svc: Svc, tenant: Tenant) -> Any:
    query = SearchRequest(query=_last_user_text(body), top_k=svc.settings.llm.sources)
    params = _params(query, request, tenant, None)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    if not body.stream:
        result = await svc.answerer.answer(params)
        svc.metrics.answers.labels(mode=result.mode, degraded=str(result.degraded).lower()).inc()
        usage = result.usage or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": "rag-router",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": result.answer or ""},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
            "rag": _rag_extension(result),
        }
    return EventSourceResponse(_chat_chunks(svc, params, completion_id, created), ping=15)


async def _chat_chunks(
    svc: Any, params: AnswerParams, completion_id: str, created: int
) -> AsyncIterator[str]:
    """OpenAI's chunk stream. Live tokens; if the model fails mid-way, the extractive answer follows."""

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return json.dumps(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": "rag-router",
                "choices": [choice],
                **extra,
            }
        )

    yield chunk({"role": "assistant", "content": ""})
    streamed = ""
    async for event, data in svc.answerer.events(params):
        if event == "token":
            streamed += data
            yield chunk({"content": data})
        elif event == "done":
            final = data.answer or ""
            if final != streamed.strip():
                # the live text was replaced (trimmed to a limit, or the model failed and the
                # extractive answer took over): send the final one
                prefix = "\n\n" if streamed else ""
                yield chunk({"content": prefix + final})
            yield chunk({}, "stop", rag=_rag_extension(data))
    yield "[DONE]"
