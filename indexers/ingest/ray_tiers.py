"""What the Ray engine's workers reach of the tiers themselves: lookups of stored hashes, and
server tiers (Qdrant, Elasticsearch) they read and write through their own clients."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from indexers.records import DOC_HASH, EmbeddedChunk
from indexers.tiers.base import StoreTier


class Lookup(Protocol):
    """What a tier holds of some documents, read from a worker: doc id → {chunk id: (content
    hash, document hash)}. ``cold_segment.ColdLookup`` (an embedded tier's SQLite) or ``Server``."""

    def hashes(self, tenant: str, doc_ids: Sequence[str]) -> dict[str, dict[str, tuple[str, str | None]]]: ...


@dataclass(frozen=True, slots=True)
class Server:
    """A server tier (Qdrant, Elasticsearch) as a worker reaches it: through its own client,
    opened by ``open`` (picklable: built from the settings where it runs) for each call."""

    open: Callable[[], StoreTier]

    def hashes(self, tenant: str, doc_ids: Sequence[str]) -> dict[str, dict[str, tuple[str, str | None]]]:
        async def fetch(tier: StoreTier) -> dict[str, dict[str, tuple[str, str | None]]]:
            out: dict[str, dict[str, tuple[str, str | None]]] = {}
            for c in await tier.fetch(tenant, doc_ids) if doc_ids else []:
                out.setdefault(c.doc_id, {})[c.chunk_id] = (c.content_hash, c.metadata.get(DOC_HASH))
            return out

        return asyncio.run(self._with(fetch))

    def upsert(self, items: Sequence[EmbeddedChunk]) -> None:
        """Returns once the server acknowledged every chunk (the adapter raises otherwise)."""

        async def write(tier: StoreTier) -> None:
            await tier.upsert(items)

        if items:
            asyncio.run(self._with(write))

    async def _with(self, work: Callable[[StoreTier], Any]) -> Any:
        tier = self.open()
        try:
            return await work(tier)
        finally:
            await tier.close()
