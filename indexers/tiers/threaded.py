"""One adapter from a blocking engine to the async ``Tier``: worker threads behind a bounded queue.

The embedded engines (Qdrant Edge, SQLite + tantivy + FAISS) block and hold the GIL in native
code, so the event loop never calls them: every call of ``ThreadedTier`` runs the engine's method
in one of the tier's two ``Worker``s (``indexers.workers``), and overload queues there, visibly,
instead of in an unbounded executor. Reads (search, hydrate, fetch, listing) have a worker of
their own: in one worker, searches queued behind a bulk load's writes and a shard's compaction
(freshness p99 9.8 s during a bulk load at 100k chunks, bench/scale.py). The engines take reads
beside writes (SQLite's WAL, FAISS behind a shared lock, Qdrant Edge under its shard lock).
An engine implements ``BlockingTier``: the members of ``Tier``, synchronous.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from indexers.records import EmbeddedChunk, StoredChunk
from indexers.tiers.base import DatedDocument, LegResults
from indexers.tiers.listing import DocumentPage, DocumentQuery
from indexers.tiers.query import HitRef, SearchQuery
from indexers.workers import Worker

log = logging.getLogger(__name__)

# Threads a tier's reads run in: FAISS, SQLite and tantivy release the GIL, so searches from
# many clients use as many cores (FAISS splits each search over cores of its own: cold_vectors).
READERS = 4


class BlockingTier(Protocol):
    """A storage engine whose calls block; ``ThreadedTier`` makes it a ``Tier``."""

    @property
    def engine(self) -> str: ...

    def ensure(self) -> None: ...

    def upsert(self, chunks: Sequence[EmbeddedChunk]) -> None: ...

    def delete(self, tenant: str, chunk_ids: Sequence[str]) -> None: ...

    def search(self, query: SearchQuery) -> LegResults: ...

    def hydrate(self, refs: Sequence[HitRef]) -> dict[HitRef, StoredChunk]: ...

    def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]: ...

    def dated(self, through_year: int) -> list[DatedDocument]: ...

    def count(self, tenant: str | None) -> int: ...

    def documents(self, query: DocumentQuery) -> DocumentPage: ...

    def ping(self) -> None:
        """Raise if the engine cannot answer."""

    def optimize(self) -> bool: ...

    def close(self) -> None: ...


class ThreadedTier:
    """``Tier`` over a ``BlockingTier``. Empty batches answer at once, without a thread hop."""

    def __init__(self, blocking: BlockingTier, *, name: str, nice: int = 0, readers: int = READERS) -> None:
        self.blocking = blocking
        self._worker = Worker(name, nice=nice)  # writes, and what subclasses orchestrate
        self._reader = Worker(f"{name}-read", threads=readers, nice=nice)
        self.run = self._worker.run  # for subclasses that orchestrate several blocking steps
        self.read = self._reader.run

    @property
    def engine(self) -> str:
        return self.blocking.engine

    async def ensure(self) -> None:
        await self.run(self.blocking.ensure)

    async def upsert(self, chunks: Sequence[EmbeddedChunk]) -> None:
        if chunks:
            await self.run(self.blocking.upsert, list(chunks))

    async def delete(self, tenant: str, chunk_ids: Sequence[str]) -> None:
        if chunk_ids:
            await self.run(self.blocking.delete, tenant, list(chunk_ids))

    async def search(self, query: SearchQuery) -> LegResults:
        return await self.read(self.blocking.search, query)

    async def hydrate(self, refs: Sequence[HitRef]) -> dict[HitRef, StoredChunk]:
        return await self.read(self.blocking.hydrate, list(refs)) if refs else {}

    async def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        return await self.read(self.blocking.fetch, tenant, list(doc_ids)) if doc_ids else []

    async def dated(self, through_year: int) -> list[DatedDocument]:
        return await self.read(self.blocking.dated, through_year)

    async def count(self, tenant: str | None = None) -> int:
        return await self.read(self.blocking.count, tenant)

    async def documents(self, query: DocumentQuery) -> DocumentPage:
        return await self.read(self.blocking.documents, query)

    async def ping(self) -> bool:
        try:
            await self.read(self.blocking.ping)
        except Exception:  # any engine failure means "not ready"
            log.exception("%s ping failed", self.engine)
            return False
        return True

    async def optimize(self) -> bool:
        return await self.run(self.blocking.optimize)

    async def close(self) -> None:
        self._reader.shutdown()  # the reads under way finish first
        await self.run(self.blocking.close)
        self._worker.shutdown()
