"""``/v1/documents``: add a small batch synchronously, list them (a page at a time), read one back
(text byte for byte), delete one, or every one whose metadata matches."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from indexers.records import SYSTEM_METADATA, StoredChunk, TierName
from indexers.text.chunk import rebuild
from rag_router.api.deps import ERROR_RESPONSES, WRITE_RESPONSES, Svc, Tenant, Writable, documents_of
from rag_router.api.schemas import (
    ChunkOut,
    DocumentList,
    DocumentListed,
    DocumentOut,
    DocumentResult,
    DocumentsRequest,
    DocumentsResponse,
)
from rag_router.errors import InvalidRequest, NotFound, PayloadTooLarge
from rag_router.listing import MAX_LIMIT, document_query, matching, parse_where
from rag_router.listing import list_documents as list_merged
from rag_router.services import Services, service_error

# A day exactly as YYYY-MM-DD: pydantic's lax date also takes "0" or "1700000000" (Unix time).
ISO_DAY = r"^\d{4}-\d{2}-\d{2}$"

router = APIRouter()


@router.post(
    "/v1/documents", response_model=DocumentsResponse, responses=WRITE_RESPONSES, dependencies=[Writable]
)
async def add_documents(body: DocumentsRequest, svc: Svc, tenant: Tenant) -> DocumentsResponse:
    limit = svc.settings.max_documents_per_request
    if len(body.documents) > limit:
        raise PayloadTooLarge(
            f"{len(body.documents)} documents in one request; at most {limit} (use /v1/ingest/jobs)"
        )
    docs = documents_of(body, tenant)
    try:
        report = await svc.pipeline.ingest(docs, placement=body.tier, collect=True)
    except Exception as exc:  # nothing of the request is acknowledged
        raise service_error(exc) or exc from exc
    svc.metrics.count_ingest(report.results, report.chunks_written)
    return DocumentsResponse(
        results=[
            DocumentResult(id=r.id, status=r.status, chunks=r.chunks, tier=r.tier, error=r.error)
            for r in report.results
        ]
    )


@router.get("/v1/documents", response_model=DocumentList, responses=ERROR_RESPONSES)
async def list_documents(
    svc: Svc,
    tenant: Tenant,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="documents per page")] = 50,
    cursor: Annotated[
        str | None, Query(min_length=1, max_length=4096, description="`next_cursor` of the previous page")
    ] = None,
    tier: Annotated[Literal["hot", "cold"] | None, Query(description="only this tier's documents")] = None,
    source: Annotated[
        str | None, Query(min_length=1, max_length=1024, description="exactly this `source` metadata")
    ] = None,
    date_gte: Annotated[str | None, Query(pattern=ISO_DAY, description="`date` on or after (day)")] = None,
    date_lte: Annotated[str | None, Query(pattern=ISO_DAY, description="`date` on or before")] = None,
    title_prefix: Annotated[
        str | None, Query(min_length=1, max_length=1024, description="title starts with this, any case")
    ] = None,
) -> DocumentList:
    """The caller's stored documents by id, a page at a time; `total` counts every match.

    Pages follow `next_cursor` ("ids after this one"): documents written or deleted meanwhile
    never make another one skipped or repeated. A date filter leaves out documents without a date."""
    query = document_query(
        tenant,
        limit=limit,
        cursor=cursor,
        source=source,
        date_gte=_day("date_gte", date_gte),
        date_lte=_day("date_lte", date_lte),
        title_prefix=title_prefix,
    )
    try:
        listing = await list_merged(svc.tiers, query, tier)
    except Exception as exc:
        raise service_error(exc) or exc from exc
    return DocumentList(
        documents=[
            DocumentListed(
                id=d.id,
                title=d.title,
                tiers=d.tiers,
                chunks=d.chunks,
                date=d.date,
                source=d.source,
                metadata=d.metadata,
            )
            for d in listing.documents
        ],
        next_cursor=listing.next_cursor,
        total=listing.total,
    )


# Documents fetched and deleted together by a delete by filter: one fetch and one delete a tier
# per page (the embedded cold tier: one SQLite transaction, one tantivy commit, one FAISS edit).
# Pages of 5,000 instead of 500 did not make a document cheaper (2.1 ms at 1M, 2.4 ms at 10M:
# the cost is per document, docs/benchmarks.md); they make 10× fewer commits. The ids stay far
# under SQLite's 32,766 bound variables and Elasticsearch's 65,536 terms.
DELETE_PAGE = 5_000


async def _fetched(svc: Services, tenant: str, doc_ids: list[str]) -> list[tuple[TierName, StoredChunk]]:
    """The documents' chunks, each with the tier that holds it (mid-retier: both)."""
    return [(name, c) for name, tier in svc.tiers.items() for c in await tier.fetch(tenant, doc_ids)]


async def _stored(svc: Services, tenant: str, doc_id: str) -> list[tuple[TierName, StoredChunk]]:
    found = await _fetched(svc, tenant, [doc_id])
    if not found:
        raise NotFound(f"document {doc_id!r} not found")
    return found


async def _delete(svc: Services, tenant: str, found: list[tuple[TierName, StoredChunk]]) -> None:
    """The chunks ``found``, removed from their tiers: one call per tier."""
    for name in {t for t, _ in found}:
        await svc.tiers[name].delete(tenant, [c.chunk_id for t, c in found if t == name])


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
        metadata={k: v for k, v in first.metadata.items() if k not in SYSTEM_METADATA},
        tiers=sorted({t for t, _ in found}),
        chunks=[
            ChunkOut(chunk_id=c.chunk_id, tier=t, text=c.text, metadata=dict(c.metadata)) for t, c in found
        ],
    )


@router.delete("/v1/documents/{doc_id:path}", responses=ERROR_RESPONSES)
async def delete_document(doc_id: str, svc: Svc, tenant: Tenant) -> dict[str, Any]:
    found = await _stored(svc, tenant, doc_id)
    await _delete(svc, tenant, found)
    return {"id": doc_id, "deleted_chunks": len(found)}


@router.delete("/v1/documents", responses=ERROR_RESPONSES)
async def delete_documents(
    svc: Svc,
    tenant: Tenant,
    where: Annotated[
        list[str],
        Query(
            min_length=1,
            max_length=16,
            description="key=value the document's metadata must hold (every one; a list's element counts), "
            "e.g. dataset=sample",
        ),
    ],
) -> dict[str, Any]:
    """Remove every one of the caller's documents whose metadata matches, from every tier."""
    pairs = parse_where(where)
    try:
        ids = await matching(svc.tiers, tenant, pairs)
        chunks = 0
        for at in range(0, len(ids), DELETE_PAGE):  # a page of documents: one fetch, one delete a tier
            found = await _fetched(svc, tenant, ids[at : at + DELETE_PAGE])
            await _delete(svc, tenant, found)
            chunks += len(found)
    except Exception as exc:
        raise service_error(exc) or exc from exc
    return {"where": pairs, "deleted_documents": len(ids), "deleted_chunks": chunks}


def _day(name: str, value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        raise InvalidRequest(f"{name} is not a calendar day: {value!r}") from exc
