"""The relevance floor judges raw leg scores; a leg of weight 0 never makes a hit relevant."""

from __future__ import annotations

from indexers.records import StoredChunk
from rag_router.search.floor import Floor
from rag_router.search.fuse import Hit, LegScore

FLOOR = Floor(dense=0.4, lexical=2.0, lexical_alone=0.5)


def hit(**legs: float) -> Hit:
    chunk = StoredChunk("c", "d", "text", None, {}, "h")
    return Hit(chunk, 0.5, "hot", {f"hot.{k}": LegScore(1, v) for k, v in legs.items()})


def test_a_hit_clears_on_either_weighted_leg() -> None:
    judged = FLOOR.judge([hit(dense=0.45), hit(lexical=9.0), hit(dense=0.2, lexical=3.0)], {}, terms=3)
    assert judged.marks == [True, True, False] and judged.any


def test_lexical_is_judged_per_query_term() -> None:
    """BM25 9.0 over 3 terms is 3.0 per term (clears); over 6 terms 1.5 (does not)."""
    assert FLOOR.judge([hit(dense=0.1, lexical=9.0)], {}, terms=3).any
    assert not FLOOR.judge([hit(dense=0.1, lexical=9.0)], {}, terms=6).any


def test_a_zero_weight_leg_never_clears() -> None:
    judged = FLOOR.judge([hit(dense=0.9)], {"dense": 0.0}, terms=2)
    assert judged.marks == [False]
    assert "dense weight 0" in judged.reason() and "declined" in judged.reason()


def test_the_lexical_leg_alone_has_its_own_floor() -> None:
    """1.0 per term: under the floor beside a weighted dense leg, over it where lexical judges alone."""
    assert not FLOOR.judge([hit(dense=0.1, lexical=2.0)], {}, terms=2).any
    assert FLOOR.judge([hit(dense=0.9, lexical=2.0)], {"dense": 0.0}, terms=2).marks == [True]
    assert FLOOR.judge([hit(lexical=2.0)], {}, terms=2).any  # the dense leg returned nothing


def test_the_reason_names_the_best_scores_against_the_floor() -> None:
    reason = FLOOR.judge([hit(dense=0.21, lexical=2.0), hit(dense=0.3)], {}, terms=2).reason()
    assert "dense cosine 0.300 < 0.4" in reason and "lexical BM25 per query term 1.000 < 2" in reason


def test_the_clause_the_question_names_is_relevant_whatever_its_scores() -> None:
    named = StoredChunk("c", "d", "text", None, {"article": 18}, "h")
    other = StoredChunk("c2", "d2", "text", None, {"article": 19}, "h")
    hits = [Hit(c, 0.5, "hot", {"hot.dense": LegScore(1, 0.1)}) for c in (named, other)]
    assert FLOOR.judge(hits, {}, terms=3, named={"article": ("18",)}).marks == [True, False]
    assert FLOOR.judge(hits, {}, terms=3).marks == [False, False]
