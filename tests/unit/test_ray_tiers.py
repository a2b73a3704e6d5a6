"""Server tiers as Ray workers reach them: one client a process, reused by every task after."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from indexers.ingest.ray import tiers as ray_tiers
from indexers.ingest.ray.tiers import Server
from indexers.records import DOC_HASH, Chunk, EmbeddedChunk, StoredChunk


class _Client:
    """A server tier as far as ``Server`` uses one; each instance is a new client."""

    made = 0

    def __init__(self) -> None:
        type(self).made += 1
        self.loop: asyncio.AbstractEventLoop | None = None
        self.held: dict[str, EmbeddedChunk] = {}
        self.closed = False

    def _on_its_loop(self) -> None:  # an async client belongs to the loop it first ran on
        loop = asyncio.get_running_loop()
        assert self.loop in (None, loop)
        self.loop = loop

    async def upsert(self, items: Sequence[EmbeddedChunk]) -> None:
        self._on_its_loop()
        self.held.update({i.chunk.chunk_id: i for i in items})

    async def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        self._on_its_loop()
        return [
            StoredChunk(c.chunk_id, c.doc_id, c.text, c.title, c.metadata, c.content_hash)
            for c in (i.chunk for i in self.held.values())
            if c.doc_id in doc_ids
        ]

    async def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    _Client.made = 0
    yield
    ray_tiers._OPENED.close()


def test_a_process_opens_one_client_a_server_and_keeps_it() -> None:
    server = Server(_Client)  # type: ignore[arg-type]
    chunk = Chunk("d#0", "d", 0, "A clause.", None, {DOC_HASH: "h"})
    server.upsert([EmbeddedChunk(chunk, np.ones(4, np.float32))])
    copy = pickle.loads(pickle.dumps(server))  # what the next task of this worker receives
    assert copy.hashes("default", ["d"]) == {"d": {"d#0": (chunk.content_hash, "h")}}
    assert copy.hashes("default", []) == {}
    assert _Client.made == 1  # one client, its connections kept from task to task
    other = Server(_Client)  # type: ignore[arg-type]
    assert other.hashes("default", ["d"]) == {}  # another server: a client of its own
    assert _Client.made == 2


def test_the_clients_are_closed_when_the_process_ends() -> None:
    server = Server(_Client)  # type: ignore[arg-type]
    server.hashes("default", ["d"])
    ((_, client),) = ray_tiers._OPENED._open.values()
    ray_tiers._OPENED.close()  # what atexit runs
    assert client.closed  # type: ignore[attr-defined]
    server.hashes("default", ["d"])  # and a later call opens one again
    assert _Client.made == 2
