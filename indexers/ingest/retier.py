"""Hot → cold moves for documents that aged out of the hot window: copy, verify, delete.

For each aged document: its chunks are read from the hot tier with the vectors it stores
(``VectorSource``; a chunk whose vector it does not give back is embedded again, through the
embedding cache), written to the cold tier, read back and compared by content hash, and only
then deleted from the hot tier. Before, every vector came from the embedding cache, and a chunk
that had left it (or never passed it) was embedded again: a retier of 500k such chunks was
hours of embedding on 2 cores (``bench/hot_scale.py``). A kill at any point
leaves the document in hot, or in both (search dedupes by chunk id); running ``retier`` again
finishes the move. A document already in cold is not copied twice: the upsert overwrites by id.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field

from indexers.ingest.pipeline import Pipeline
from indexers.ingest.results import place
from indexers.records import Chunk, Document, EmbeddedChunk, StoredChunk
from indexers.tiers.base import StoreTier, TierUnavailable, VectorSource

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RetierReport:
    moved: int = 0
    chunks: int = 0
    aged: int = 0
    errors: list[str] = field(default_factory=list)


def to_chunk(stored: StoredChunk, tenant: str) -> Chunk:
    return Chunk(
        chunk_id=stored.chunk_id,
        doc_id=stored.doc_id,
        n=int(stored.chunk_id.rsplit("#", 1)[1]),
        text=stored.text,
        title=stored.title,
        metadata=dict(stored.metadata),
        tenant=tenant,
    )


async def retier(
    hot: StoreTier,
    cold: StoreTier,
    pipeline: Pipeline,
    *,
    hot_window_days: int,
    today: dt.date,
    batch_docs: int = 64,
    dry_run: bool = False,
    step_timeout_s: float = 600.0,
) -> RetierReport:
    """Move every hot document dated before the window to the cold tier. A step (the listing,
    one batch's move) that takes over ``step_timeout_s`` stops the run with ``TierUnavailable``:
    what was moved stays moved, the rest stays hot (a batch cut short may be in both tiers until
    the next run; search dedupes)."""
    report = RetierReport()
    cutoff = today - dt.timedelta(days=hot_window_days)
    async with _step(step_timeout_s, "listing the hot tier's dated documents", report):
        candidates = await hot.dated(cutoff.year)
    aged = [
        (tenant, doc_id)
        for tenant, doc_id, metadata in candidates
        if place(Document(doc_id, "", metadata=metadata), "auto", hot_window_days, today) == "cold"
    ]
    report.aged = len(aged)
    if dry_run:
        return report
    by_tenant: dict[str, list[str]] = {}
    for tenant, doc_id in aged:
        by_tenant.setdefault(tenant, []).append(doc_id)
    for tenant, ids in by_tenant.items():
        for start in range(0, len(ids), batch_docs):
            async with _step(step_timeout_s, "moving a batch", report):
                await _move(hot, cold, pipeline, tenant, ids[start : start + batch_docs], report)
    if report.moved:  # as a bulk load ends: the embedded cold tier's FAISS may want IVF now
        await cold.optimize()  # (505k chunks moved stayed in a flat index until the next start)
    return report


@contextlib.asynccontextmanager
async def _step(seconds: float, what: str, report: RetierReport) -> AsyncIterator[None]:
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise TierUnavailable(f"retier: {what} took over {seconds:g} s ({report.moved} moved)") from None


async def _move(
    hot: StoreTier, cold: StoreTier, pipeline: Pipeline, tenant: str, ids: Sequence[str], report: RetierReport
) -> None:
    stored = await hot.fetch(tenant, ids)
    chunks = [to_chunk(s, tenant) for s in stored]
    broken = {s.doc_id for s, c in zip(stored, chunks, strict=True) if c.content_hash != s.content_hash}
    for doc_id in sorted(broken):
        report.errors.append(f"{tenant}/{doc_id}: stored chunks do not round-trip; left in hot")
    chunks = [c for c in chunks if c.doc_id not in broken]
    if not chunks:
        return
    held = await hot.vectors(tenant, [c.chunk_id for c in chunks]) if isinstance(hot, VectorSource) else {}
    missing = [c for c in chunks if c.chunk_id not in held]
    if missing:
        held |= dict(
            zip(
                (c.chunk_id for c in missing),
                await pipeline.embed([c.embed_text for c in missing]),
                strict=True,
            )
        )
    await cold.upsert([EmbeddedChunk(c, held[c.chunk_id]) for c in chunks])
    wanted = _by_doc((c.doc_id, c.chunk_id, c.content_hash) for c in chunks)
    copied = _by_doc((s.doc_id, s.chunk_id, s.content_hash) for s in await cold.fetch(tenant, list(wanted)))
    extra = [cid for doc, got in copied.items() for cid in got if cid not in wanted.get(doc, {})]
    if extra:  # leftovers of an older version in cold
        await cold.delete(tenant, extra)
    verified = [
        doc for doc, want in wanted.items() if all(copied.get(doc, {}).get(k) == v for k, v in want.items())
    ]
    for doc in sorted(set(wanted) - set(verified)):
        report.errors.append(f"{tenant}/{doc}: cold copy did not verify; left in hot")
    await hot.delete(tenant, [cid for doc in verified for cid in wanted[doc]])
    report.moved += len(verified)
    report.chunks += sum(len(wanted[doc]) for doc in verified)


def _by_doc(rows: Iterable[tuple[str, str, str]]) -> dict[str, dict[str, str]]:
    """{doc id: {chunk id: content hash}}."""
    out: dict[str, dict[str, str]] = {}
    for doc_id, chunk_id, chash in rows:
        out.setdefault(doc_id, {})[chunk_id] = chash
    return out
