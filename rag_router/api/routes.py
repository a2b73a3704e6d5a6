"""HTTP routes: thin adapters from wire models to the services."""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from indexers.ingest.jobs import JobState
from indexers.records import Document, StoredChunk, TierName, content_hash
from indexers.text.chunk import rebuild
from rag_router.api.errors import ERROR_RESPONSES, request_id
from rag_router.api.schemas import (
    ChunkOut,
    DocumentOut,
    DocumentResult,
    DocumentsRequest,
    DocumentsResponse,
    JobCreated,
    JobError,
    JobOut,
    SearchRequest,
    SearchResponse,
)
from rag_router.errors import NotFound, PayloadTooLarge, Unauthorized
from rag_router.search.filters import parse_filters
from rag_router.search.flow import SearchParams
from rag_router.services import Services

router = APIRouter()


async def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


async def tenant(request: Request) -> str:
    """The tenant of the credential. Keys are ``key`` (default tenant) or ``tenant:key``."""
    keys = request.app.state.settings.api_keys
    if not keys:
        return "default"
    header = request.headers.get("authorization", "")
    given = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
    for secret in keys:
        name, _, key = secret.get_secret_value().rpartition(":")
        if given and hmac.compare_digest(given.encode(), key.encode()):
            return name or "default"
    raise Unauthorized("missing or unknown API key (Authorization: Bearer <key>)")


Svc = Annotated[Services, Depends(services)]
Tenant = Annotated[str, Depends(tenant)]


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(svc: Svc) -> JSONResponse:
    backends: dict[str, dict[str, Any]] = {}
    for name, tier in svc.tiers.items():
        backends[name] = {"ok": await tier.ping(), "engine": tier.engine}
    backends["llm"] = {
        "ok": True,
        "engine": "extractive" if not svc.settings.llm.base_url else "openai-compatible",
    }
    backends["embedder"] = {"ok": True, "engine": svc.embedder.model_name}
    ready = all(b["ok"] for b in backends.values())
    body = {"status": "ready" if ready else "unavailable", "backends": backends}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics")
async def metrics(svc: Svc) -> Response:
    return PlainTextResponse(svc.metrics.render(), media_type="text/plain; version=0.0.4")


def search_params(body: SearchRequest, request: Request, tenant: str) -> SearchParams:
    """The wire request → the search flow's parameters (also used by the answer routes)."""
    return SearchParams(
        query=body.query,
        top_k=body.top_k,
        route=body.route,
        filters=parse_filters(body.filters, tenant),
        legs=tuple(dict.fromkeys(body.legs)) if body.legs else ("dense", "lexical"),
        request_id=request_id(request),
    )


@router.post("/v1/search", response_model=SearchResponse, responses=ERROR_RESPONSES)
async def search(body: SearchRequest, request: Request, svc: Svc, tenant: Tenant) -> SearchResponse:
    return SearchResponse.from_outcome(await svc.searcher.search(search_params(body, request, tenant)))


def _documents(body: DocumentsRequest, tenant: str) -> list[Document]:
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


@router.post("/v1/documents", response_model=DocumentsResponse, responses=ERROR_RESPONSES)
async def add_documents(body: DocumentsRequest, svc: Svc, tenant: Tenant) -> DocumentsResponse:
    limit = svc.settings.max_documents_per_request
    if len(body.documents) > limit:
        raise PayloadTooLarge(
            f"{len(body.documents)} documents in one request; at most {limit} (use /v1/ingest/jobs)"
        )
    docs = _documents(body, tenant)
    report = await svc.pipeline.ingest(docs, placement=body.tier, collect=True)
    svc.metrics.count_ingest(report.results, report.chunks_written)
    return DocumentsResponse(
        results=[
            DocumentResult(id=r.id, status=r.status, chunks=r.chunks, tier=r.tier, error=r.error)
            for r in report.results
        ]
    )


async def _stored(svc: Services, tenant: str, doc_id: str) -> list[tuple[TierName, StoredChunk]]:
    found: list[tuple[TierName, StoredChunk]] = []
    for name, tier in svc.tiers.items():
        found.extend((name, c) for c in await tier.fetch(tenant, [doc_id]))
    if not found:
        raise NotFound(f"document {doc_id!r} not found")
    return found


@router.get("/v1/documents/{doc_id:path}", response_model=DocumentOut, responses=ERROR_RESPONSES)
async def get_document(doc_id: str, svc: Svc, tenant: Tenant) -> DocumentOut:
    found = await _stored(svc, tenant, doc_id)
    first = found[0][1]
    # one tier's chunks in order give the text back (a document mid-retier is in both)
    own = sorted((c for t, c in found if t == found[0][0]), key=lambda c: int(c.chunk_id.rsplit("#", 1)[1]))
    return DocumentOut(
        id=doc_id,
        title=first.title,
        text=rebuild([(c.text, c.metadata.get("char_start")) for c in own]),
        metadata={k: v for k, v in first.metadata.items() if k != "char_start"},
        tiers=sorted({t for t, _ in found}),
        chunks=[
            ChunkOut(chunk_id=c.chunk_id, tier=t, text=c.text, metadata=dict(c.metadata)) for t, c in found
        ],
    )


@router.delete("/v1/documents/{doc_id:path}", responses=ERROR_RESPONSES)
async def delete_document(doc_id: str, svc: Svc, tenant: Tenant) -> dict[str, Any]:
    found = await _stored(svc, tenant, doc_id)
    for name in {t for t, _ in found}:
        await svc.tiers[name].delete(tenant, [c.chunk_id for t, c in found if t == name])
    return {"id": doc_id, "deleted_chunks": len(found)}


@router.post("/v1/ingest/jobs", status_code=202, response_model=JobCreated, responses=ERROR_RESPONSES)
async def create_job(body: DocumentsRequest, svc: Svc, tenant: Tenant) -> JobCreated:
    """Accepted once the job and all its documents are durably in the job ledger."""
    return JobCreated(job_id=await svc.jobs.submit(tenant, body.tier, _documents(body, tenant)))


def _job_out(state: JobState | None, tenant: str, job_id: str) -> JobOut:
    if state is None or state.tenant != tenant:
        raise NotFound(f"ingest job {job_id!r} not found")
    return JobOut(
        job_id=state.id,
        status=state.status,
        total=state.total,
        done=state.done,
        failed=state.failed,
        errors=[JobError(**e) for e in state.errors],
        chunks_per_s=round(state.chunks_per_s, 2),
        eta_s=None if state.eta_s is None else round(state.eta_s, 1),
        created_at=state.created,
        updated_at=state.updated,
    )


@router.get("/v1/ingest/jobs/{job_id}", response_model=JobOut, responses=ERROR_RESPONSES)
async def get_job(job_id: str, svc: Svc, tenant: Tenant) -> JobOut:
    return _job_out(await svc.jobs.get(job_id), tenant, job_id)


@router.delete("/v1/ingest/jobs/{job_id}", response_model=JobOut, responses=ERROR_RESPONSES)
async def cancel_job(job_id: str, svc: Svc, tenant: Tenant) -> JobOut:
    """Cancels a queued or running job (a running one stops between batches); finished ones stay."""
    _job_out(await svc.jobs.get(job_id), tenant, job_id)
    return _job_out(await svc.jobs.cancel(job_id), tenant, job_id)
