"""Listing what a tier stores, document by document: the request, the page, and the helpers the
Qdrant tiers share (neither Qdrant Edge nor a Qdrant server orders or ranges by a keyword).

A tier stores chunks; a document is the chunks that share a ``doc_id``. A listing is ordered by
document id in code-point order (the byte order of UTF-8: SQLite's BINARY collation, an
Elasticsearch keyword's sort, and Python's ``str`` comparison agree), and a page is "the first
``limit`` ids strictly after ``after``". So a cursor is only the last id returned: a document
written or deleted between two pages never makes another one skipped or repeated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from indexers.tiers.query import Filters

MAX_LIMIT = 500


@dataclass(frozen=True, slots=True)
class DocumentQuery:
    """One page of a tenant's documents. ``filters`` holds the tenant, the date range and the
    keyword terms (e.g. ``source``); every chunk of a document carries the same, so a chunk-level
    filter is a document-level one."""

    filters: Filters
    title_prefix: str | None = None  # case-insensitive (``str.casefold``) prefix of the title
    after: str | None = None  # exclusive: the last id of the previous page
    limit: int = 50
    # key → value pairs the metadata holds (the value, or one of a list's): a hint, not a filter.
    # A tier that can narrow the walk by them does (the embedded cold tier, in SQL); every caller
    # checks the documents again (``rag_router.listing.metadata_matches``), so a tier may ignore it.
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DocumentSummary:
    """A stored document as a list shows it: its first stored chunk's title and metadata."""

    doc_id: str
    title: str | None
    chunks: int
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DocumentPage:
    documents: list[DocumentSummary]
    total: int  # documents matching the filters, on every page (not only this one)
    more: bool  # whether ids after the last one on this page match too


def folded(text: str | None) -> str:
    return (text or "").casefold()


def title_matches(title: str | None, prefix: str | None) -> bool:
    """The one definition of ``title_prefix`` for the tiers that test it in Python (SQLite calls it)."""
    return prefix is None or folded(title).startswith(folded(prefix))


def page_of(counts: Mapping[str, int], after: str | None, limit: int) -> tuple[list[str], bool]:
    """The page's ids from every matching id (with its chunk count): sorted, after the cursor."""
    ids = sorted(d for d in counts if after is None or d > after)
    return ids[:limit], len(ids) > limit


def summaries(
    ids: list[str], counts: Mapping[str, int], payloads: Iterable[Mapping[str, Any]]
) -> list[DocumentSummary]:
    """One summary per id, from the payload of its lowest-numbered chunk (a Qdrant payload)."""
    first: dict[str, Mapping[str, Any]] = {}
    for p in payloads:
        held = first.get(p["doc_id"])
        if held is None or p.get("n", 0) < held.get("n", 0):
            first[p["doc_id"]] = p
    out = []
    for doc_id in ids:
        p = first.get(doc_id, {})
        out.append(DocumentSummary(doc_id, p.get("title"), counts[doc_id], p.get("metadata") or {}))
    return out


FIRST_KEYS = ["doc_id", "n", "title", "metadata"]  # what ``summaries`` reads of a payload
