"""The tier seams: what search needs of an engine (``SearchTier``), what writing needs (``StoreTier``).

A tier holds chunks with their dense vector, their lexical terms and their filterable
fields, and searches both legs (dense and lexical) under the same filters in one call.
Fusion across legs and tiers happens above, in ``rag_router.search.fuse``, so every hit keeps
each leg's rank and score.

Errors::

    TierError                  the engine failed (I/O, server down, timeout)
    └── TierUnavailable        the engine cannot be reached at all
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from indexers.records import EmbeddedChunk, StoredChunk, Vector
from indexers.tiers.listing import DocumentPage, DocumentQuery
from indexers.tiers.query import HitRef, LegHit, SearchQuery

LegResults = Mapping[str, list[LegHit]]  # leg name ("dense" | "lexical") → ranked hits
DatedDocument = tuple[str, str, Mapping[str, Any]]  # (tenant, document id, metadata)


class TierError(Exception):
    """A storage engine failed to do what was asked."""


class TierUnavailable(TierError):
    """A storage engine cannot be reached."""


@runtime_checkable
class SearchTier(Protocol):
    """What the search flow needs of a storage engine: search, then hydrate the hits it keeps."""

    @property
    def engine(self) -> str:
        """A short name of the engine, e.g. ``qdrant-edge`` (shown by /readyz)."""
        ...

    async def search(self, query: SearchQuery) -> LegResults:
        """Run the requested legs with the query's filters applied before top-k.

        With ``query.payload`` False a tier may leave ``LegHit.chunk`` empty (query, then fetch):
        reading 2 × 100 payloads to keep 10 costs more than the search itself.
        """
        ...

    async def hydrate(self, refs: Sequence[HitRef]) -> dict[HitRef, StoredChunk]:
        """The chunks behind ``LegHit.ref`` values; a ref deleted since the search is absent."""
        ...

    async def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        """Every stored chunk of these documents, in document order (GET, change detection)."""
        ...

    async def ping(self) -> bool:
        """Whether the engine answers."""
        ...


@runtime_checkable
class StoreTier(Protocol):
    """What writing and administration need of a storage engine (ingestion, retier, the CLI)."""

    @property
    def engine(self) -> str: ...

    async def ensure(self) -> None:
        """Create collections/indexes if missing and catch up any derived index."""

    async def upsert(self, chunks: Sequence[EmbeddedChunk]) -> None:
        """Insert or replace chunks by id; returns only once the write is durable."""

    async def delete(self, tenant: str, chunk_ids: Sequence[str]) -> None:
        """Remove chunks by id (missing ids are not an error)."""

    async def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]: ...

    async def optimize(self) -> bool:
        """Build indexes for what was bulk-written (the embedded engines need a nudge)."""
        ...

    async def dated(self, through_year: int) -> list[DatedDocument]:
        """Documents of every tenant dated in or before ``through_year`` (``retier`` candidates)."""
        ...

    async def count(self, tenant: str | None = None) -> int:
        """Number of chunks stored (for one tenant, or all)."""
        ...

    async def documents(self, query: DocumentQuery) -> DocumentPage:
        """One page of the tenant's documents, by id, after ``query.after``, with the total that
        match (``indexers.tiers.listing``)."""
        ...

    async def close(self) -> None:
        """Flush and release the engine's resources."""


@runtime_checkable
class VectorSource(Protocol):
    """A tier that gives back the dense vectors it stores (both hot tiers): a retier copies them
    to the cold tier instead of embedding each chunk again (``indexers.ingest.retier``)."""

    async def vectors(self, tenant: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vector of each of ``chunk_ids`` the tier holds, by chunk id."""
        ...


@runtime_checkable
class Tier(SearchTier, StoreTier, Protocol):
    """A storage engine: both seams. Blocking engines get them from ``threaded.ThreadedTier``."""
