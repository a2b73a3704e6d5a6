"""The embedded cold tier runs a search's two legs side by side, and returns what one call would."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from indexers.records import Chunk, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers.base import LegResults
from indexers.tiers.local_cold import LocalColdTier
from indexers.tiers.query import Filters, SearchQuery

A = Analyzer()
TEXTS = ["apples and pears", "bananas from the south", "cherries in june", "apples in june"]


def _vector(i: int) -> np.ndarray:
    v = np.zeros(8, dtype=np.float32)
    v[i % 8] = 1.0
    return v


def _query(text: str, i: int | None) -> SearchQuery:
    vector = None if i is None else _vector(i)
    return SearchQuery(text, A.query_terms(text), vector, Filters("default"), k=3)


def _keys(found: LegResults) -> dict[str, list[tuple[int, float]]]:
    return {leg: [(h.key, round(h.score, 5)) for h in hits] for leg, hits in found.items()}


async def test_both_legs_run_at_once_and_give_one_calls_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tier = LocalColdTier(tmp_path, dim=8, analyzer=A)
    await tier.ensure()
    await tier.upsert(
        [EmbeddedChunk(Chunk(f"d{i}#0", f"d{i}", 0, t, None, {}), _vector(i)) for i, t in enumerate(TEXTS)]
    )
    query = _query("apples in june", 3)
    together = tier.local.search(query)  # both legs in one blocking call
    # each leg waits for the other to have started: run one after the other, the first call
    # would wait out the barrier and fail
    meeting = threading.Barrier(2, timeout=30)
    legs_seen: list[tuple[str, ...]] = []
    search = tier.local.search

    def meet(q: SearchQuery) -> LegResults:
        legs_seen.append(tuple(q.legs))
        meeting.wait()
        return search(q)

    monkeypatch.setattr(tier.local, "search", meet)
    found = await tier.search(query)
    assert sorted(legs_seen) == [("dense",), ("lexical",)]
    assert _keys(found) == _keys(together)
    assert found["lexical"][0].chunk.chunk_id == "d3#0"
    assert found["dense"][0].chunk.chunk_id == "d3#0"
    await tier.close()


async def test_a_search_with_one_leg_to_run_is_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tier = LocalColdTier(tmp_path, dim=8, analyzer=A)
    await tier.ensure()
    await tier.upsert([EmbeddedChunk(Chunk("d0#0", "d0", 0, "apples", None, {}), _vector(0))])
    calls: list[tuple[str, ...]] = []
    search = tier.local.search

    def count(q: SearchQuery) -> LegResults:
        calls.append(tuple(q.legs))
        return search(q)

    monkeypatch.setattr(tier.local, "search", count)
    found = await tier.search(_query("apples", None))  # no vector: the lexical leg alone
    assert calls == [("dense", "lexical")]
    assert [h.chunk.chunk_id for h in found["lexical"]] == ["d0#0"]
    await tier.close()
