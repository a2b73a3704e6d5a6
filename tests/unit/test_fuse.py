from __future__ import annotations

import pytest

from indexers.records import StoredChunk, chunk_key
from indexers.tiers.query import LegHit
from rag_router.search.fuse import Fused, convex, dbsf, fuse, rrf


def hit(cid: str, score: float = 1.0) -> LegHit:
    return LegHit(chunk_key("t", cid), score, StoredChunk(cid, cid.split("#")[0], "t", None, {}, "h"), cid)


def ids(fused: list[Fused]) -> list[str]:
    return [str(f.hit.ref) for f in fused]


def test_rrf_sums_reciprocal_ranks_and_keeps_each_leg() -> None:
    legs = {
        "hot.dense": [hit("a#0", 0.9), hit("b#0", 0.8)],
        "cold.lexical": [hit("b#0", 12.0), hit("c#0", 7.0)],
    }
    fused = rrf(legs, k=60)
    assert ids(fused) == ["b#0", "a#0", "c#0"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[0].legs["hot.dense"].rank == 2 and fused[0].legs["cold.lexical"].score == 12.0
    assert fused[0].tier == "cold"  # where it ranked best
    assert fused[1].tier == "hot" and set(fused[1].legs) == {"hot.dense"}


def test_weights_by_leg_kind() -> None:
    legs = {"hot.dense": [hit("a#0")], "hot.lexical": [hit("b#0")]}
    assert ids(rrf(legs, weights={"lexical": 2.0}))[0] == "b#0"
    assert ids(rrf(legs, weights={"dense": 3.0, "lexical": 2.0}))[0] == "a#0"


def test_tiers_of_one_leg_kind_are_merged_by_score_first() -> None:
    """A tier's weak best match must not count as a rank-1 hit next to the other tier's strong one."""
    legs = {
        "hot.dense": [hit("weak#0", 0.31)],
        "cold.dense": [hit("strong#0", 0.92), hit("good#0", 0.75)],
        "hot.lexical": [hit("weak#0", 1.1)],
        "cold.lexical": [hit("strong#0", 14.0), hit("good#0", 9.0)],
    }
    fused = rrf(legs, k=60)
    assert ids(fused) == ["strong#0", "good#0", "weak#0"]
    assert fused[2].score == pytest.approx(2 / 63)
    assert fused[2].legs["hot.dense"].rank == 1  # its rank inside its own tier is still reported


def test_limit_and_empty() -> None:
    assert rrf({}) == []
    legs = {"hot.dense": [hit(f"d{i}#0") for i in range(10)]}
    assert len(rrf(legs, limit=3)) == 3
    with pytest.raises(ValueError, match="tier"):
        rrf({"warm.dense": [hit("a#0")]})


def test_the_same_chunk_in_two_tiers_is_one_hit_hydrated_from_where_it_ranked_best() -> None:
    hot = LegHit(chunk_key("t", "a#0"), 0.70, None, "hot-ref")
    cold = LegHit(chunk_key("t", "a#0"), 0.90, None, 17)  # ids only: no chunk yet
    fused = rrf({"hot.dense": [hot], "cold.dense": [cold, hit("b#0", 0.5)]}, limit=1)
    (top,) = fused
    assert top.key == chunk_key("t", "a#0") and top.tier == "cold" and top.hit.ref == 17
    assert set(top.legs) == {"hot.dense", "cold.dense"}  # ranks kept for the kept hit only


def test_score_fusions_normalise_each_leg_before_weighting() -> None:
    """dbsf and convex read scores, not ranks: a leg's clear winner outweighs a close race."""
    legs = {
        "hot.dense": [hit("a", 0.90), hit("b", 0.89), hit("c", 0.10)],
        "hot.lexical": [hit("b", 30.0), hit("a", 2.0), hit("c", 1.0)],
    }
    for method in ("dbsf", "convex"):
        fused = fuse(method, legs)  # type: ignore[arg-type]
        assert ids(fused) == ["b", "a", "c"], method
        assert all(0.0 <= f.score <= 2.0 for f in fused)
    # convex: min-max per leg, so a leg's best is 1 and its worst 0
    scores = {str(f.hit.ref): f.score for f in convex(legs)}
    assert scores == pytest.approx({"b": 0.79 / 0.80 + 1.0, "a": 1.0 + 1.0 / 29.0, "c": 0.0})
    assert fuse("rrf", legs, k=60)[0].score == rrf(legs, k=60)[0].score
    weighted = convex(legs, weights={"dense": 1.0, "lexical": 0.0})
    assert ids(weighted)[0] == "a"  # with the lexical leg weighted out, dense decides


@pytest.mark.parametrize("method", ["rrf", "dbsf", "convex"])
def test_a_leg_of_weight_zero_only_fills_in_after_the_weighted_ones(method: str) -> None:
    """An embedder that cannot read the query: its ranking must not reorder the lexical one."""
    legs = {
        "cold.lexical": [hit("a", 9.0), hit("b", 8.9), hit("c", 8.8), hit("d", 0.1)],
        "cold.dense": [hit("d", 0.9), hit("x", 0.8), hit("c", 0.7), hit("y", 0.6)],
    }
    fused = fuse(method, legs, weights={"dense": 0.0, "lexical": 1.0})  # type: ignore[arg-type]
    assert ids(fused) == ["a", "b", "c", "d", "x", "y"]


def test_dbsf_keeps_the_order_of_outliers() -> None:
    """Scores past μ + 3σ are not clipped to one value: the leg's own order survives."""
    scores = [100.0, 90.0] + [1.0] * 40
    fused = dbsf({"hot.lexical": [hit(f"d{i}", s) for i, s in enumerate(scores)]})
    assert ids(fused)[:2] == ["d0", "d1"] and fused[0].score > fused[1].score > 1.0
