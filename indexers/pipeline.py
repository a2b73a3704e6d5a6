"""The ingest flow, top to bottom: load → chunk → place → diff → embed → write → clean up.

Idempotent by content hash: a chunk whose text, title and metadata are unchanged in the
tier it belongs to is neither re-embedded nor re-written; a changed document's stale
chunks (and its copies in the other tier, if it moved) are deleted only after its new
chunks are durable, so a document is never missing mid-update.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Literal

from indexers.chunk import Chunker
from indexers.documents import Chunk, Document, EmbeddedChunk, StoredChunk, TierName
from indexers.embed import AsyncEmbedder
from indexers.load import LoadFailure
from indexers.structure import heading_metadata
from indexers.tiers.base import Tier

log = logging.getLogger(__name__)

Placement = Literal["auto", "hot", "cold"]
Status = Literal["created", "updated", "unchanged", "failed"]
Placer = Callable[[Document], TierName]


@dataclass(frozen=True, slots=True)
class DocResult:
    id: str
    status: Status
    chunks: int = 0
    tier: TierName | None = None
    error: str | None = None


@dataclass(slots=True)
class IngestReport:
    results: list[DocResult] = field(default_factory=list)
    chunks_written: int = 0
    chunks_embedded: int = 0
    seconds: float = 0.0

    def count(self, status: Status) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def chunks_per_s(self) -> float:
        return self.chunks_written / self.seconds if self.seconds > 0 else 0.0


def place(doc: Document, placement: Placement | Placer, hot_window_days: int, today: dt.date) -> TierName:
    """Hot when dated inside the window or undated; cold when older; or as forced."""
    if callable(placement):
        return placement(doc)
    if placement != "auto":
        return placement
    date = doc.date
    if date is None and doc.year is not None:
        date = dt.date(doc.year, 12, 31)
    return "hot" if date is None or date >= today - dt.timedelta(days=hot_window_days) else "cold"


def batched(items: Iterable[Document | LoadFailure], size: int) -> Iterator[list[Document | LoadFailure]]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


class Pipeline:
    def __init__(
        self,
        *,
        embedder: AsyncEmbedder,
        chunker: Chunker,
        tiers: Mapping[TierName, Tier],
        hot_window_days: int = 365,
        today: Callable[[], dt.date] = dt.date.today,
        batch_docs: int = 64,
    ) -> None:
        self._embedder = embedder
        self._chunker = chunker
        self._tiers = tiers
        self._hot_window_days = hot_window_days
        self._today = today
        self._batch_docs = batch_docs

    async def ingest(
        self,
        documents: Iterable[Document | LoadFailure],
        *,
        placement: Placement | Placer = "auto",
        optimize: bool = False,
        on_batch: Callable[[IngestReport], None] | None = None,
    ) -> IngestReport:
        report = IngestReport()
        started = time.perf_counter()
        for batch in batched(documents, self._batch_docs):
            await self._ingest_batch(batch, placement, report)
            report.seconds = time.perf_counter() - started
            if on_batch is not None:
                on_batch(report)
        if optimize:
            await asyncio.gather(*(tier.optimize() for tier in self._tiers.values()))
        report.seconds = time.perf_counter() - started
        return report

    async def _ingest_batch(
        self, batch: Sequence[Document | LoadFailure], placement: Placement | Placer, report: IngestReport
    ) -> None:
        docs = [_with_structure(d) for d in _last_version_only([d for d in batch if isinstance(d, Document)])]
        report.results.extend(
            DocResult(f.source, "failed", error=f.reason) for f in batch if isinstance(f, LoadFailure)
        )
        if not docs:
            return
        today = self._today()
        planned = [
            (doc, place(doc, placement, self._hot_window_days, today), self._chunker.chunk(doc))
            for doc in docs
        ]
        existing = await self._existing(docs)
        to_embed: list[tuple[TierName, Chunk]] = []
        stale: list[tuple[TierName, str, str]] = []
        results: list[DocResult] = []
        for doc, tier, chunks in planned:
            stored = existing.get((doc.tenant, doc.id), {})
            fresh = [c for c in chunks if stored.get((tier, c.chunk_id)) != c.content_hash]
            keep = {(tier, c.chunk_id) for c in chunks}
            gone = [(t, doc.tenant, cid) for (t, cid) in stored if (t, cid) not in keep]
            to_embed.extend((tier, c) for c in fresh)
            stale.extend(gone)
            status: Status = "created" if not stored else ("updated" if fresh or gone else "unchanged")
            results.append(DocResult(doc.id, status, len(chunks), tier))
        await self._write(to_embed)
        await self._delete(stale)
        report.results.extend(results)
        report.chunks_embedded += len(to_embed)
        report.chunks_written += len(to_embed)

    async def _existing(
        self, docs: Sequence[Document]
    ) -> dict[tuple[str, str], dict[tuple[TierName, str], str]]:
        """(tenant, doc id) → {(tier, chunk id): content hash} over every tier."""
        out: dict[tuple[str, str], dict[tuple[TierName, str], str]] = {}
        by_tenant: dict[str, list[str]] = {}
        for doc in docs:
            by_tenant.setdefault(doc.tenant, []).append(doc.id)
        for tenant, ids in by_tenant.items():
            for name, tier in self._tiers.items():
                stored: list[StoredChunk] = await tier.fetch(tenant, ids)
                for chunk in stored:
                    out.setdefault((tenant, chunk.doc_id), {})[(name, chunk.chunk_id)] = chunk.content_hash
        return out

    async def _write(self, items: Sequence[tuple[TierName, Chunk]]) -> None:
        if not items:
            return
        vectors = await self._embedder.embed_bulk([c.embed_text for _, c in items])
        by_tier: dict[TierName, list[EmbeddedChunk]] = {}
        for (tier, chunk), vector in zip(items, vectors, strict=True):
            by_tier.setdefault(tier, []).append(EmbeddedChunk(chunk, vector))
        for tier, chunks in by_tier.items():
            await self._tiers[tier].upsert(chunks)

    async def _delete(self, stale: Sequence[tuple[TierName, str, str]]) -> None:
        groups: dict[tuple[TierName, str], list[str]] = {}
        for tier, tenant, chunk_id in stale:
            groups.setdefault((tier, tenant), []).append(chunk_id)
        for (tier, tenant), ids in groups.items():
            await self._tiers[tier].delete(tenant, ids)


def _last_version_only(docs: Sequence[Document]) -> list[Document]:
    """Within one batch, the last copy of a (tenant, id) wins, as it would across batches."""
    latest: dict[tuple[str, str], Document] = {}
    for doc in docs:
        latest.pop((doc.tenant, doc.id), None)
        latest[(doc.tenant, doc.id)] = doc
    return list(latest.values())


def _with_structure(doc: Document) -> Document:
    """Add article/section/chapter from the document's heading when its metadata lacks them."""
    found = heading_metadata(doc.title, doc.text, doc.metadata)
    return dataclasses.replace(doc, metadata={**doc.metadata, **found}) if found else doc
