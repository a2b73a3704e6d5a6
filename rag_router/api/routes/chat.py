"""``POST /v1/chat/completions``: OpenAI-compatible chat (JSON or chunk stream) over the answer flow."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse

from rag_router.answer.flow import AnswerOutcome, AnswerParams
from rag_router.api.chat_schemas import ChatRequest
from rag_router.api.deps import STREAMED_RESPONSES, Svc, Tenant, answer_params
from rag_router.api.schemas import MAX_HISTORY, QUERY_MAX_CHARS, SearchRequest, SearchResponse
from rag_router.errors import InvalidRequest
from rag_router.services import Services

router = APIRouter()


def _user_texts(body: ChatRequest) -> tuple[str, list[str]]:
    """The last user message with text (the question), and the earlier ones (oldest first, at
    most ``MAX_HISTORY``): a follow-up takes its subject from them (``search.followup``)."""
    texts = []
    for message in body.messages:
        if message.role != "user":
            continue
        if isinstance(message.content, str):
            text = message.content
        else:
            text = " ".join(p.get("text", "") for p in message.content or [] if p.get("type") == "text")
        if text.strip():
            texts.append(text)
    if not texts:
        raise InvalidRequest("no user message with text content")
    if len(texts[-1]) > QUERY_MAX_CHARS:  # what /v1/search takes, said as a 422 (not a 500)
        raise InvalidRequest(
            f"the last user message has {len(texts[-1])} characters; at most {QUERY_MAX_CHARS}"
        )
    earlier = [t for t in texts[:-1] if len(t) <= QUERY_MAX_CHARS][-MAX_HISTORY:]
    return texts[-1], earlier


def _rag_extension(result: AnswerOutcome) -> dict[str, Any]:
    search = SearchResponse.from_outcome(result.search)
    sources = [{"n": c["n"], "chunk_id": c["chunk_id"], "doc_id": c["doc_id"]} for c in result.citations]
    return {
        "sources": sources,
        "hits": [h.model_dump(include={"chunk_id", "doc_id", "title", "score", "tier"}) for h in search.hits],
        "route": search.route.model_dump(),
        "mode": result.mode,
        "degraded": result.degraded,
        "abstained": result.abstained,
    }


@router.post("/v1/chat/completions", responses=STREAMED_RESPONSES)
async def chat_completions(body: ChatRequest, request: Request, svc: Svc, tenant: Tenant) -> Any:
    question, earlier = _user_texts(body)
    query = SearchRequest(query=question, top_k=svc.settings.llm.sources)
    params = answer_params(query, request, tenant, None, earlier)
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
    svc: Services, params: AnswerParams, completion_id: str, created: int
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
