"""Adaptive fusion: per-query leg weights from how clearly each leg's best hit leads, and how far
the legs agree."""

from __future__ import annotations

import pytest

from indexers.records import StoredChunk, chunk_key
from indexers.tiers.query import LegHit
from rag_router.search.adaptive import Adaptive, adapt, agreement, dbsf_scale, lead
from rag_router.search.fuse import Fused, adaptive, dbsf, fuse


def hit(cid: str, score: float) -> LegHit:
    return LegHit(chunk_key("t", cid), score, StoredChunk(cid, cid, "t", None, {}, "h"), cid)


def ranked(names: str, scores: list[float]) -> list[LegHit]:
    return [hit(n, s) for n, s in zip(names.split(), scores, strict=True)]


def ids(fused: list[Fused]) -> list[str]:
    return [str(f.hit.ref) for f in fused]


# Dense: a and x lead clearly, the rest trail. Lexical: a flat head of six (x … u), then a tail.
DENSE = ranked("a x b c d e f g h i", [0.90, 0.80, 0.50, 0.49, 0.48, 0.47, 0.46, 0.45, 0.44, 0.43])
LEXICAL = ranked("x y z w v u t s q p", [10.0, 9.5, 9.0, 8.5, 8.0, 7.5, 1.0, 0.9, 0.8, 0.7])
BOTH = {"dense": DENSE, "lexical": LEXICAL}


def test_the_leg_whose_best_hit_leads_gains_weight_over_a_flat_head() -> None:
    assert lead(DENSE, 5) > lead(LEXICAL, 5) > 0
    weights = adapt(BOTH, None)
    assert weights["dense"] > 1.0 > weights["lexical"]


def test_a_leg_with_flat_scores_has_no_lead_and_loses_weight() -> None:
    flat = ranked("x y z w v u t s q p", [5.0] * 10)
    assert lead(flat, 5) == 0.0
    weights = adapt({"dense": DENSE, "lexical": flat}, None)
    assert weights["lexical"] < 1.0 < weights["dense"]


def test_agreement_keeps_the_configured_weights_and_disagreement_moves_them() -> None:
    lexical = ranked("a x b c d e f g h i", [18.0, 12.0, 9.0, 8.9, 8.8, 8.7, 8.6, 8.5, 8.4, 8.3])
    assert agreement({"dense": DENSE, "lexical": lexical}, 5) == 1.0
    assert adapt({"dense": DENSE, "lexical": lexical}, {"lexical": 2.0}) == {"dense": 1.0, "lexical": 2.0}
    # the same lexical scores on other chunks from the third place on: partial agreement
    partial = ranked("a x y z w v u t s q", [18.0, 12.0, 9.0, 8.9, 8.8, 8.7, 8.6, 8.5, 8.4, 8.3])
    assert agreement({"dense": DENSE, "lexical": partial}, 5) == pytest.approx(0.4)
    moved = adapt({"dense": DENSE, "lexical": partial}, None, Adaptive(gamma=1.0, low=0.01, high=100))
    full = adapt(BOTH, None, Adaptive(gamma=1.0, low=0.01, high=100))
    assert agreement(BOTH, 5) < 0.4 and abs(full["dense"] - 1) > abs(moved["dense"] - 1) > 0


def test_weights_stay_within_bounds_and_gamma_zero_changes_nothing() -> None:
    config = Adaptive(gamma=50.0, low=0.5, high=2.0)
    weights = adapt(BOTH, {"dense": 1.0, "lexical": 3.0}, config)
    assert weights == pytest.approx({"dense": 2.0, "lexical": 1.5})  # both clamped: × 2 and × 0.5
    assert adapt(BOTH, None, Adaptive(gamma=0)) == {"dense": 1.0, "lexical": 1.0}


def test_a_leg_of_weight_zero_or_one_hit_neither_votes_nor_moves() -> None:
    assert adapt(BOTH, {"dense": 0.0}) == {"dense": 0.0, "lexical": 1.0}
    assert adapt({"dense": DENSE, "lexical": []}, None) == {"dense": 1.0, "lexical": 1.0}
    assert adapt({"dense": DENSE, "lexical": LEXICAL[:1]}, None) == {"dense": 1.0, "lexical": 1.0}
    assert adapt({"dense": DENSE}, None) == {"dense": 1.0}


def test_deterministic_and_independent_of_leg_order() -> None:
    one = adapt(BOTH, {"lexical": 2.0})
    assert (
        one == adapt({"lexical": LEXICAL, "dense": DENSE}, {"lexical": 2.0}) == adapt(BOTH, {"lexical": 2.0})
    )


def test_lead_is_the_margin_over_the_hit_k_places_down_in_dbsf_units() -> None:
    scaled = dbsf_scale([h.score for h in LEXICAL])
    assert lead(LEXICAL, 5) == pytest.approx(scaled[0] - scaled[5])
    assert lead(LEXICAL[:3], 5) == pytest.approx(scaled_head(LEXICAL[:3]))  # short: to the last
    assert lead(LEXICAL[:1], 5) == 0.0


def scaled_head(hits: list[LegHit]) -> float:
    scaled = dbsf_scale([h.score for h in hits])
    return scaled[0] - scaled[-1]


def test_dbsf_scale_of_flat_or_single_scores_is_one() -> None:
    assert dbsf_scale([]) == [] and dbsf_scale([0.4]) == [1.0] and dbsf_scale([0.4, 0.4, 0.4]) == [1.0] * 3
    sd = 0.5**0.5  # sample σ of [1, 0]; μ = 0.5, and μ ± 3σ maps to [0, 1]
    assert dbsf_scale([1.0, 0.0]) == pytest.approx([0.5 + 0.5 / (6 * sd), 0.5 - 0.5 / (6 * sd)])


def test_adaptive_fusion_is_dbsf_with_the_adapted_weights() -> None:
    legs = {"hot.dense": DENSE, "hot.lexical": LEXICAL}
    assert ids(dbsf(legs))[:4] == ["x", "a", "y", "z"]  # the lexical leg's flat head fills in
    assert ids(adaptive(legs))[:4] == ["x", "a", "b", "c"]  # the leading leg orders the rest
    assert ids(adaptive(legs)) == ids(dbsf(legs, weights=adapt(BOTH, None)))
    assert ids(adaptive(legs, config=Adaptive(gamma=0))) == ids(dbsf(legs))
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


def test_legs_that_return_the_same_few_hits_agree_fully() -> None:
    """Fewer hits than k: the share is of the shortest leg's top, so the same three hits are full
    agreement (and leave the configured weights as they are), not 3/5."""
    few = {"dense": ranked("a b c", [0.9, 0.5, 0.1]), "lexical": ranked("c a b", [7.0, 6.0, 1.0])}
    assert agreement(few, 5) == 1.0
    three = ranked("a b c", [0.9, 0.5, 0.1])
    assert agreement({"dense": three, "lexical": ranked("a b", [7.0, 6.0])}, 5) == 1.0
    assert agreement({"dense": three, "lexical": []}, 5) == 0.0
