"""What the Ray engine's workers reach of the tiers themselves: lookups of stored hashes, and
server tiers (Qdrant, Elasticsearch) they read and write through their own clients."""

from __future__ import annotations

import asyncio
import atexit
import threading
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from indexers.records import DOC_HASH, EmbeddedChunk
from indexers.tiers.base import StoreTier

T = TypeVar("T")


class Lookup(Protocol):
    """What a tier holds of some documents, read from a worker: doc id → {chunk id: (content
    hash, document hash)}. ``cold_segment.ColdLookup`` (an embedded tier's SQLite) or ``Server``."""

    def hashes(self, tenant: str, doc_ids: Sequence[str]) -> dict[str, dict[str, tuple[str, str | None]]]: ...


@dataclass(frozen=True, slots=True)
class Server:
    """A server tier (Qdrant, Elasticsearch) as a worker reaches it: through its own client,
    opened by ``open`` (picklable: built from the settings where it runs) once in each worker
    process and kept there for the tasks that follow (its connections with it)."""

    open: Callable[[], StoreTier]
    key: str = field(default_factory=lambda: uuid.uuid4().hex)  # the same in every pickled copy

    def hashes(self, tenant: str, doc_ids: Sequence[str]) -> dict[str, dict[str, tuple[str, str | None]]]:
        async def fetch(tier: StoreTier) -> dict[str, dict[str, tuple[str, str | None]]]:
            out: dict[str, dict[str, tuple[str, str | None]]] = {}
            for c in await tier.fetch(tenant, doc_ids) if doc_ids else []:
                out.setdefault(c.doc_id, {})[c.chunk_id] = (c.content_hash, c.metadata.get(DOC_HASH))
            return out

        return _OPENED.run(self, fetch)

    def upsert(self, items: Sequence[EmbeddedChunk]) -> None:
        """Returns once the server acknowledged every chunk (the adapter raises otherwise)."""

        async def write(tier: StoreTier) -> None:
            await tier.upsert(items)

        if items:
            _OPENED.run(self, write)


class _Opened:
    """This process's client of each ``Server``, with the event loop it lives on (an async
    client belongs to one loop: every call runs on the same ``asyncio.Runner``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, tuple[asyncio.Runner, StoreTier]] = {}
        atexit.register(self.close)

    def run(self, server: Server, work: Callable[[StoreTier], Coroutine[Any, Any, T]]) -> T:
        with self._lock:  # one call at a time on a loop (a Ray worker runs one task at a time)
            if server.key not in self._open:
                runner = asyncio.Runner()
                try:
                    self._open[server.key] = (runner, runner.run(_opened(server.open)))
                except BaseException:
                    runner.close()
                    raise
            runner, tier = self._open[server.key]
            return runner.run(work(tier))

    def close(self) -> None:
        with self._lock:
            opened, self._open = self._open, {}
        for runner, tier in opened.values():
            try:
                runner.run(tier.close())
            finally:
                runner.close()


async def _opened(open_: Callable[[], StoreTier]) -> StoreTier:
    return open_()  # inside the loop: a client made here belongs to it


_OPENED = _Opened()
