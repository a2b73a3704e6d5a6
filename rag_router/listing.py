"""The document list: each tier's page of a tenant's documents, merged by id into one page.

Every tier lists by id after a cursor (``indexers.tiers.listing``), so the merge is exact: the
first ``limit`` ids of the union of two sorted pages of ``limit`` are the first ``limit`` of the
union of the two whole lists (an id missing from a tier's page is larger than all ``limit`` ids on
it). A document in both tiers (a retier copies, verifies, then deletes) is one row. The cursor is
the last id returned, base64url-encoded: opaque to callers, and "strictly after it" keeps a
listing stable while documents are written or deleted.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from indexers.records import SYSTEM_METADATA, TierName, parse_date
from indexers.tiers.base import StoreTier
from indexers.tiers.listing import MAX_LIMIT, DocumentPage, DocumentQuery, DocumentSummary
from indexers.tiers.query import Filters, Range
from rag_router.errors import InvalidRequest

__all__ = [
    "MAX_LIMIT",
    "Listing",
    "decode_cursor",
    "document_query",
    "encode_cursor",
    "list_documents",
    "matching",
    "parse_where",
]

TIER_ORDER: tuple[TierName, ...] = ("hot", "cold")  # the hot copy's title and metadata are the newer


@dataclass(slots=True)
class Listed:
    """One row of the list."""

    id: str
    title: str | None
    chunks: int
    metadata: dict[str, Any]
    tiers: list[TierName] = field(default_factory=list)

    @property
    def date(self) -> str | None:
        day = parse_date(self.metadata.get("date"))
        return day.isoformat() if day else None

    @property
    def source(self) -> str | None:
        value = self.metadata.get("source")
        return None if value is None else str(value)


@dataclass(frozen=True, slots=True)
class Listing:
    documents: list[Listed]
    next_cursor: str | None
    total: int


def encode_cursor(doc_id: str) -> str:
    return base64.urlsafe_b64encode(doc_id.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The id a cursor holds; a cursor this service did not give is the caller's mistake."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        doc_id = raw.decode("utf-8")
        if not doc_id or encode_cursor(doc_id) != cursor:
            raise ValueError("not canonical")
    except (binascii.Error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise InvalidRequest(f"cursor {cursor[:80]!r} is not one this service gave") from exc
    return doc_id


def document_query(
    tenant: str,
    *,
    limit: int,
    cursor: str | None = None,
    source: str | None = None,
    date_gte: dt.date | None = None,
    date_lte: dt.date | None = None,
    title_prefix: str | None = None,
) -> DocumentQuery:
    """The wire's filters as the tiers take them (``source`` is a keyword field, ``date`` a range)."""
    if date_gte is not None and date_lte is not None and date_gte > date_lte:
        raise InvalidRequest(f"date_gte {date_gte} is after date_lte {date_lte}")
    dates = Range(gte=date_gte, lte=date_lte) if date_gte is not None or date_lte is not None else None
    keywords = {"source": (source,)} if source is not None else {}
    return DocumentQuery(
        Filters(tenant, date=dates, keywords=keywords),
        title_prefix=title_prefix,
        after=decode_cursor(cursor) if cursor is not None else None,
        limit=limit,
    )


async def list_documents(
    tiers: Mapping[TierName, StoreTier], query: DocumentQuery, only: TierName | None = None
) -> Listing:
    """One page over the tiers (or ``only`` one). A tier that fails fails the list: a list that
    silently misses a tier's documents would say they are not stored."""
    names = [n for n in TIER_ORDER if n in tiers and (only is None or n == only)]
    pages = await asyncio.gather(*(tiers[n].documents(query) for n in names))
    merged: dict[str, Listed] = {}
    for name, page in zip(names, pages, strict=True):
        for doc in page.documents:
            _merge(merged, name, doc)
    rows = [merged[i] for i in sorted(merged)[: query.limit]]
    more = len(merged) > query.limit or any(p.more for p in pages)
    return Listing(rows, encode_cursor(rows[-1].id) if more and rows else None, _total(pages))


def _merge(merged: dict[str, Listed], tier: TierName, doc: DocumentSummary) -> None:
    row = merged.get(doc.doc_id)
    if row is None:
        meta = {k: v for k, v in doc.metadata.items() if k not in SYSTEM_METADATA}
        row = merged[doc.doc_id] = Listed(doc.doc_id, doc.title, doc.chunks, meta)
    row.chunks = max(row.chunks, doc.chunks)  # mid-retier the copy may be partial
    row.tiers.append(tier)


def _total(pages: list[DocumentPage]) -> int:
    # Counting a document a retier holds in both tiers once would need both tiers' whole id
    # sets; that moment is short (copy, verify, delete), so the sum is the total.
    return sum(p.total for p in pages)


def parse_where(terms: list[str]) -> dict[str, str]:
    """``["dataset=sample", "lang=en"]`` → their pairs; a term without ``=`` or a key is the caller's."""
    where: dict[str, str] = {}
    for term in terms:
        key, eq, value = term.partition("=")
        if not eq or not key.strip():
            raise InvalidRequest(f"where {term[:80]!r} is not key=value (e.g. dataset=sample)")
        where[key.strip()] = value
    return where


def metadata_matches(metadata: Mapping[str, Any], where: Mapping[str, str]) -> bool:
    """Every pair holds: the value as a string, or one of a list's (``tags=x``)."""
    for key, wanted in where.items():
        value = metadata.get(key)
        values = value if isinstance(value, list | tuple) else [value]
        if not any(v is not None and str(v) == wanted for v in values):
            return False
    return True


async def matching(tiers: Mapping[TierName, StoreTier], tenant: str, where: Mapping[str, str]) -> list[str]:
    """The ids of the tenant's documents whose metadata matches ``where``, every page walked. The
    tiers get ``where`` to narrow their walk by (``DocumentQuery.metadata``: SQL in the embedded
    cold tier, where a walk of every page took minutes at 10M chunks); each page is checked here."""
    found: list[str] = []
    cursor: str | None = None
    while True:
        query = document_query(tenant, limit=MAX_LIMIT, cursor=cursor)
        page = await list_documents(tiers, dataclasses.replace(query, metadata=dict(where)))
        found += [d.id for d in page.documents if metadata_matches(d.metadata, where)]
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor
