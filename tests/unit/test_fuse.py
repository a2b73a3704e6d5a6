from __future__ import annotations

import pytest

from indexers.documents import LegHit, StoredChunk
from rag_router.fuse import rrf


def hit(cid: str, score: float = 1.0) -> LegHit:
    return LegHit(StoredChunk(cid, cid.split("#")[0], "t", None, {}, "h"), score)


def test_rrf_sums_reciprocal_ranks_and_keeps_each_leg() -> None:
    legs = {
        "hot.dense": [hit("a#0", 0.9), hit("b#0", 0.8)],
        "cold.lexical": [hit("b#0", 12.0), hit("c#0", 7.0)],
    }
    fused = rrf(legs, k=60)
    assert [h.chunk_id for h in fused] == ["b#0", "a#0", "c#0"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[0].legs["hot.dense"].rank == 2 and fused[0].legs["cold.lexical"].score == 12.0
    assert fused[0].tier == "cold"  # where it ranked best
    assert fused[1].tier == "hot" and set(fused[1].legs) == {"hot.dense"}


def test_weights_by_leg_kind() -> None:
    legs = {"hot.dense": [hit("a#0")], "hot.lexical": [hit("b#0")]}
    assert rrf(legs, weights={"lexical": 2.0})[0].chunk_id == "b#0"
    assert rrf(legs, weights={"dense": 3.0, "lexical": 2.0})[0].chunk_id == "a#0"


def test_tiers_of_one_leg_kind_are_merged_by_score_first() -> None:
    """A tier's weak best match must not count as a rank-1 hit next to the other tier's strong one."""
    legs = {
        "hot.dense": [hit("weak#0", 0.31)],
        "cold.dense": [hit("strong#0", 0.92), hit("good#0", 0.75)],
        "hot.lexical": [hit("weak#0", 1.1)],
        "cold.lexical": [hit("strong#0", 14.0), hit("good#0", 9.0)],
    }
    fused = rrf(legs, k=60)
    assert [h.chunk_id for h in fused] == ["strong#0", "good#0", "weak#0"]
    assert fused[2].score == pytest.approx(2 / 63)
    assert fused[2].legs["hot.dense"].rank == 1  # its rank inside its own tier is still reported


def test_limit_and_empty() -> None:
    assert rrf({}) == []
    legs = {"hot.dense": [hit(f"d{i}#0") for i in range(10)]}
    assert len(rrf(legs, limit=3)) == 3
    with pytest.raises(ValueError, match="tier"):
        rrf({"warm.dense": [hit("a#0")]})
