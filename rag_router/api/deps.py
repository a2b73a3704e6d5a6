"""What routes depend on: the services, the caller's tenant, wire → flow parameter builders, and the
error responses every endpoint documents (the one envelope, ``errors.py``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Depends, Request

from indexers.records import Document, content_hash
from rag_router.answer.flow import AnswerParams
from rag_router.api.errors import request_id
from rag_router.api.keys import KeyRing
from rag_router.api.schemas import ConstraintsIn, DocumentsRequest, ErrorEnvelope, SearchRequest
from rag_router.errors import RateLimited, Unauthorized
from rag_router.search.filters import parse_filters
from rag_router.search.flow import SearchParams
from rag_router.search.followup import resolve
from rag_router.services import Services, service_error
from rag_router.stores import disk_guard

log = logging.getLogger(__name__)

# The error responses every endpoint documents in the OpenAPI schema (the one envelope).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorEnvelope} for code in (401, 404, 413, 422, 429, 503)
}
# ... and of the endpoints that write: 507 while the data dir's disk is under its floor.
WRITE_RESPONSES: dict[int | str, dict[str, Any]] = {**ERROR_RESPONSES, 507: {"model": ErrorEnvelope}}
# One server-sent event: its name (none for chat's OpenAI-style chunks) and its data (JSON text,
# or chat's final "[DONE]").
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "properties": {"event": {"type": "string"}, "data": {"type": "string"}, "id": {"type": "string"}},
    "required": ["data"],
}
# Endpoints that answer ``"stream": true`` with server-sent events.
STREAMED_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    200: {
        "description": 'JSON, or with "stream": true server-sent events',
        "content": {"text/event-stream": {"schema": SSE_EVENT}},
    },
}


async def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


async def tenant(request: Request) -> str:
    """The tenant of the credential (``api/keys.py``); a key over its rate limit gets 429."""
    keys: KeyRing = request.app.state.keys
    if not keys.enabled:
        return "default"
    header = request.headers.get("authorization", "")
    given = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
    key = keys.find(given) if given else None
    if key is None:
        raise Unauthorized("missing or unknown API key (Authorization: Bearer <key>)")
    wait = keys.retry_after(key)
    if wait is not None:
        log.info("key %s over its rate limit; retry in %d s", key.label, wait)  # never the key itself
        raise RateLimited(f"this key is over its rate limit ({request.app.state.settings.rate_limit})", wait)
    return key.tenant


async def writable(request: Request, tenant: Annotated[str, Depends(tenant)]) -> None:
    """Refuse a write (507) while the data dir's file system is under ``storage.min_free_mb``;
    asked after the key, so that only a caller with a key learns about the disk."""
    try:
        disk_guard(request.app.state.settings).check()
    except Exception as exc:
        raise service_error(exc) or exc from exc


Svc = Annotated[Services, Depends(services)]
Tenant = Annotated[str, Depends(tenant)]
Writable = Depends(writable)


def search_params(body: SearchRequest, request: Request, tenant: str) -> SearchParams:
    """The wire request → the search flow's parameters (also used by the answer routes)."""
    return SearchParams(
        query=body.query,
        top_k=body.top_k,
        route=body.route,
        filters=parse_filters(body.filters, tenant),
        legs=tuple(dict.fromkeys(body.legs)) if body.legs else ("dense", "lexical"),
        rerank=body.rerank,
        request_id=request_id(request),
    )


def answer_params(
    body: SearchRequest,
    request: Request,
    tenant: str,
    constraints: ConstraintsIn | None,
    history: Sequence[str] = (),
) -> AnswerParams:
    """``history``: the conversation's earlier questions, oldest first; a follow-up without a
    subject of its own is searched with theirs (``search.followup``)."""
    search = search_params(body, request, tenant)
    if history:
        followed = resolve(body.query, history, today=dt.date.today())
        if followed.carried is not None:
            search = dataclasses.replace(search, query=followed.query, carried=followed.carried)
    return AnswerParams(
        history=tuple(history),
        search=search,
        constraints=constraints.domain() if constraints else None,
        schema=constraints.json_schema if constraints else None,
        sources=min(body.top_k, request.app.state.settings.llm.sources),
    )


def documents_of(body: DocumentsRequest, tenant: str) -> list[Document]:
    return [
        Document(
            id=d.id or content_hash(d.title or "", d.text),
            text=d.text,
            title=d.title,
            metadata=d.metadata,
            tenant=tenant,
        )
        for d in body.documents
    ]
