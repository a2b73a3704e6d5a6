"""Adaptive fusion: per-query leg weights from how far the legs corroborate each other's best hits."""

from __future__ import annotations

import pytest

from indexers.records import StoredChunk, chunk_key
from indexers.tiers.query import LegHit
from rag_router.search.adaptive import Adaptive, adapt, dbsf_scale, support
from rag_router.search.fuse import Fused, adaptive, dbsf, fuse


def hit(cid: str, score: float) -> LegHit:
    return LegHit(chunk_key("t", cid), score, StoredChunk(cid, cid, "t", None, {}, "h"), cid)


def ranked(names: str, scores: list[float]) -> list[LegHit]:
    return [hit(n, s) for n, s in zip(names.split(), scores, strict=True)]


def ids(fused: list[Fused]) -> list[str]:
    return [str(f.hit.ref) for f in fused]


DESCENDING = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
# Dense ranks a b c … ; lexical agrees on the middle but puts two noise hits (x, y) on top that
# dense ranks last: the dense leg's best hits are corroborated, the lexical leg's are not.
DENSE = ranked("a b c d e f x y", DESCENDING)
LEXICAL = ranked("x y a b c d e f", [30.0, 29.0, 12.0, 11.0, 10.0, 9.0, 8.0, 7.0])


def test_the_corroborated_leg_gains_weight_and_the_other_loses_it() -> None:
    weights = adapt({"dense": DENSE, "lexical": LEXICAL}, None, Adaptive(k=2))
    assert weights["dense"] > 1.0 > weights["lexical"]


def test_agreeing_legs_keep_the_configured_weights() -> None:
    same = ranked("a b c d e f", [0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    lexical = ranked("a b c d e f", [18.0, 16.0, 14.0, 12.0, 10.0, 8.0])  # same order, other scale
    weights = adapt({"dense": same, "lexical": lexical}, {"lexical": 2.0})
    assert weights == pytest.approx({"dense": 1.0, "lexical": 2.0})


def test_a_flat_leg_loses_weight() -> None:
    """Flat scores rank nothing: the informative leg's hits are all 'corroborated' by it, while its
    own top hits (an arbitrary order) get only the other leg's average."""
    flat = ranked("y a x b c d e f", [5.0] * 8)
    weights = adapt({"dense": DENSE, "lexical": flat}, None, Adaptive(k=2))
    assert weights["lexical"] < 1.0 < weights["dense"]


def test_weights_stay_within_bounds_and_gamma_zero_changes_nothing() -> None:
    config = Adaptive(k=2, gamma=50.0, low=0.5, high=2.0)
    weights = adapt({"dense": DENSE, "lexical": LEXICAL}, {"dense": 1.0, "lexical": 3.0}, config)
    assert weights == pytest.approx({"dense": 2.0, "lexical": 1.5})  # both clamped: × 2 and × 0.5
    assert adapt({"dense": DENSE, "lexical": LEXICAL}, None, Adaptive(gamma=0)) == {
        "dense": 1.0,
        "lexical": 1.0,
    }


def test_a_leg_of_weight_zero_neither_votes_nor_moves() -> None:
    weights = adapt({"dense": DENSE, "lexical": LEXICAL}, {"dense": 0.0})
    assert weights == {"dense": 0.0, "lexical": 1.0}
    assert adapt({"dense": DENSE, "lexical": []}, None) == {"dense": 1.0, "lexical": 1.0}
    assert adapt({"dense": DENSE}, None) == {"dense": 1.0}


def test_deterministic_and_independent_of_leg_order() -> None:
    one = adapt({"dense": DENSE, "lexical": LEXICAL}, None, Adaptive(k=3))
    two = adapt({"lexical": LEXICAL, "dense": DENSE}, None, Adaptive(k=3))
    assert one == two == adapt({"dense": DENSE, "lexical": LEXICAL}, None, Adaptive(k=3))


def test_support_is_the_other_legs_normalised_score_of_the_top_hits() -> None:
    got = support({"dense": DENSE, "lexical": LEXICAL}, k=2)
    lexical_values = dbsf_scale([h.score for h in LEXICAL])
    lexical_scale = {str(h.ref): v for h, v in zip(LEXICAL, lexical_values, strict=True)}
    dense_scale = {str(h.ref): v for h, v in zip(DENSE, dbsf_scale(DESCENDING), strict=True)}
    assert got["dense"] == pytest.approx((lexical_scale["a"] + lexical_scale["b"]) / 2)
    assert got["lexical"] == pytest.approx((dense_scale["x"] + dense_scale["y"]) / 2)
    # a top hit the other leg did not return counts as that leg's lowest score
    short = support({"dense": DENSE, "lexical": ranked("z a", [3.0, 1.0])}, k=1)
    assert short["lexical"] == pytest.approx(min(dbsf_scale(DESCENDING)))


def test_dbsf_scale_of_flat_or_single_scores_is_one() -> None:
    assert dbsf_scale([]) == [] and dbsf_scale([0.4]) == [1.0] and dbsf_scale([0.4, 0.4, 0.4]) == [1.0] * 3
    sd = 0.5**0.5  # sample σ of [1, 0]; μ = 0.5, and μ ± 3σ maps to [0, 1]
    assert dbsf_scale([1.0, 0.0]) == pytest.approx([0.5 + 0.5 / (6 * sd), 0.5 - 0.5 / (6 * sd)])


def test_adaptive_fusion_ranks_the_corroborated_legs_hit_first_where_dbsf_does_not() -> None:
    outlier = ranked("x y a b c d e f", [60.0, 20.0, 12.0, 11.0, 10.0, 9.0, 8.0, 7.0])
    legs = {"hot.dense": DENSE, "hot.lexical": outlier}
    assert ids(dbsf(legs))[0] == "x"  # the lexical leg's outlier, which dense ranks last, wins
    fused = adaptive(legs, config=Adaptive(k=2))
    assert ids(fused)[:2] == ["a", "b"]
    assert set(ids(fused)) == set(ids(dbsf(legs)))  # reweighted, nothing lost
    assert ids(fuse("adaptive", legs)) == ids(adaptive(legs))  # the name the settings use


def test_tiers_are_merged_before_the_legs_are_weighed() -> None:
    """The same chunks split over two tiers weigh as they do in one."""
    split = {
        "hot.dense": DENSE[:4],
        "cold.dense": DENSE[4:],
        "hot.lexical": LEXICAL[::2],
        "cold.lexical": LEXICAL[1::2],
    }
    assert ids(fuse("adaptive", split)) == ids(fuse("adaptive", {"hot.dense": DENSE, "hot.lexical": LEXICAL}))
