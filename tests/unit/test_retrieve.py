"""A failing or slow tier degrades the response; only all tiers failing fails it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from indexers.records import EmbeddedChunk, StoredChunk
from indexers.tiers.base import LegResults, TierUnavailable
from indexers.tiers.query import Filters, LegHit, SearchQuery
from rag_router.errors import BackendUnavailable
from rag_router.search.retrieve import retrieve


class ScriptedTier:
    """Fault injection only: stands in for a server that errors or hangs."""

    engine = "scripted"

    def __init__(self, *, fail: bool = False, delay: float = 0.0) -> None:
        self.fail, self.delay = fail, delay

    async def search(self, query: SearchQuery) -> LegResults:
        await asyncio.sleep(self.delay)
        if self.fail:
            raise TierUnavailable("connection refused")
        return {"dense": [LegHit("a#0", 0.5, StoredChunk("a#0", "a", "t", None, {}, "h"), "a#0")]}

    async def ensure(self) -> None: ...
    async def upsert(self, chunks: Sequence[EmbeddedChunk]) -> None: ...
    async def delete(self, tenant: str, chunk_ids: Sequence[str]) -> None: ...
    async def optimize(self) -> bool:
        return False

    async def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        return []

    async def count(self, tenant: str | None = None) -> int:
        return 0

    async def ping(self) -> bool:
        return not self.fail

    async def close(self) -> None: ...


QUERY = SearchQuery("q", ["q"], None, Filters("default"))


async def test_one_failing_tier_degrades() -> None:
    tiers = {"hot": ScriptedTier(), "cold": ScriptedTier(fail=True)}
    out = await retrieve(tiers, ["hot", "cold"], QUERY, deadline=time.monotonic() + 1)  # type: ignore[arg-type]
    assert out.unavailable == ["cold"] and list(out.legs) == ["hot.dense"]


async def test_a_tier_past_the_deadline_is_cut_off() -> None:
    tiers = {"hot": ScriptedTier(), "cold": ScriptedTier(delay=5)}
    started = time.monotonic()
    out = await retrieve(tiers, ["hot", "cold"], QUERY, deadline=time.monotonic() + 0.2)  # type: ignore[arg-type]
    assert time.monotonic() - started < 4.0  # the tier takes 5 s: it was cut off, not waited for
    assert out.unavailable == ["cold"] and "hot.dense" in out.legs


async def test_all_tiers_failing_is_backend_unavailable() -> None:
    tiers = {"hot": ScriptedTier(fail=True), "cold": ScriptedTier(fail=True)}
    with pytest.raises(BackendUnavailable):
        await retrieve(tiers, ["hot", "cold"], QUERY, deadline=time.monotonic() + 1)  # type: ignore[arg-type]
