"""The relevance floor judges raw leg scores; a leg of weight 0 never makes a hit relevant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from indexers.records import StoredChunk
from rag_router.search.floor import UNKNOWN_CHUNKS, Floor, Relevance, Sizes, max_idf
from rag_router.search.fuse import Hit, LegScore

FLOOR = Floor(dense=0.4, lexical=2.0, lexical_alone=0.5)


def hit(**legs: float) -> Hit:
    chunk = StoredChunk("c", "d", "text", None, {}, "h")
    return Hit(chunk, 0.5, "hot", {f"hot.{k}": LegScore(1, v) for k, v in legs.items()})


def judge(
    hits: Sequence[Hit],
    weights: Mapping[str, float],
    terms: int,
    named: Mapping[str, Sequence[str]] | None = None,
    sizes: Mapping[str, int] | None = None,
) -> Relevance:
    """``sizes``: chunks per tier; unknown (the default), lexical is BM25 per term alone."""
    words = [f"t{i}" for i in range(terms)]
    return FLOOR.judge(hits, weights, words, named, sizes=sizes or {})


def test_a_hit_clears_on_either_weighted_leg() -> None:
    judged = judge([hit(dense=0.45), hit(lexical=9.0), hit(dense=0.2, lexical=3.0)], {}, terms=3)
    assert judged.marks == [True, True, False] and judged.any


def test_lexical_is_judged_per_query_term() -> None:
    """BM25 9.0 over 3 terms is 3.0 per term (clears); over 6 terms 1.5 (does not)."""
    assert judge([hit(dense=0.1, lexical=9.0)], {}, terms=3).any
    assert not judge([hit(dense=0.1, lexical=9.0)], {}, terms=6).any


def test_a_zero_weight_leg_never_clears() -> None:
    judged = judge([hit(dense=0.9)], {"dense": 0.0}, terms=2)
    assert judged.marks == [False]
    assert "dense not counted" in judged.reason() and "declined" in judged.reason()


def test_the_lexical_leg_alone_has_its_own_floor() -> None:
    """0.5 BM25 per term: under the floor beside a weighted dense leg, over it alone."""
    assert not judge([hit(dense=0.1, lexical=2.0)], {}, terms=2).any
    assert judge([hit(dense=0.9, lexical=2.0)], {"dense": 0.0}, terms=2).marks == [True]
    assert judge([hit(lexical=2.0)], {}, terms=2).any  # the dense leg returned nothing


def test_lexical_is_judged_against_the_largest_idf_of_the_store() -> None:
    """The newcomer's case: the same match scores less BM25 in a small store (IDF grows with the
    store), so BM25 per term declined an answerable question in a 35-document store; over the
    store's largest IDF, ln(1 + (N - 0.5) / 1.5), the same match means the same in any size."""
    small, large = max_idf(40), max_idf(4000)
    assert small < large
    match = 0.3  # per term, per unit of IDF: a hit holding ~a third of the question's terms
    for chunks, idf in ((40, small), (4000, large)):
        found = hit(lexical=match * idf * 4)
        assert judge([found], {"dense": 0.0}, terms=4, sizes={"hot": chunks}).marks == [False]  # 0.3 < 0.5
        strong = hit(lexical=0.6 * idf * 4)
        assert judge([strong], {"dense": 0.0}, terms=4, sizes={"hot": chunks}).marks == [True]
    assert not judge([hit(lexical=0.6 * small * 4)], {"dense": 0.0}, terms=4, sizes={"hot": 4000}).any


def test_each_tier_is_normalised_by_its_own_size() -> None:
    cold = StoredChunk("c", "d", "text", None, {}, "h")
    both = Hit(cold, 0.5, "cold", {"hot.lexical": LegScore(1, 1.0), "cold.lexical": LegScore(1, 2.0)})
    judged = judge([both], {"dense": 0.0}, terms=1, sizes={"hot": 10, "cold": 1_000_000})
    assert judged.best["lexical"] == 1.0 / max_idf(10)  # hot's: larger once normalised


def test_the_reason_names_the_best_scores_against_the_floor() -> None:
    reason = judge([hit(dense=0.21, lexical=2.0), hit(dense=0.3)], {}, terms=2).reason()
    assert (
        "dense cosine 0.300 < 0.4" in reason and "lexical BM25 per query term / max IDF 1.000 < 2" in reason
    )


def test_the_clause_the_question_names_is_relevant_whatever_its_scores() -> None:
    named = StoredChunk("c", "d", "text", None, {"article": 18}, "h")
    other = StoredChunk("c2", "d2", "text", None, {"article": 19}, "h")
    hits = [Hit(c, 0.5, "hot", {"hot.dense": LegScore(1, 0.1)}) for c in (named, other)]
    assert judge(hits, {}, terms=3, named={"article": ("18",)}).marks == [True, False]
    assert judge(hits, {}, terms=3).marks == [False, False]


async def test_a_tier_whose_count_fails_never_fails_the_search() -> None:
    """A tier that fails its count gets the size assumed for an uncounted tier; the other tier
    keeps its own, and nothing is raised into the search."""

    class Down:
        async def count(self) -> int:
            raise ConnectionError("hot is down")

    class Up:
        async def count(self) -> int:
            return 40

    sizes = Sizes({"hot": Down(), "cold": Up()})
    assert await sizes.get(["hot", "cold"]) == {"hot": UNKNOWN_CHUNKS, "cold": 40}


def test_the_second_models_cosines_have_a_floor_of_their_own() -> None:
    """e5 scores unrelated texts 0.80-0.86: its dense leg (a Chinese question) and its cross-space
    leg (an English question's Chinese chunks) are judged on ``second``, not on MiniLM's 0.4."""
    floor = Floor(dense=0.4, lexical=2.0, lexical_alone=0.5, second=0.89)
    words = ["t0", "t1"]
    assert floor.judge([hit(dense=0.86), hit(dense=0.9)], {}, words, sizes={}, second=True).marks == [
        False,
        True,
    ]
    assert floor.judge([hit(xdense=0.86), hit(xdense=0.9)], {}, words, sizes={}).marks == [False, True]
    # beside e5 the lexical leg keeps the floor it has when it judges alone
    assert floor.judge([hit(dense=0.5, lexical=1.2)], {}, words, sizes={}, second=True).marks == [True]
    judged = floor.judge([hit(dense=0.86)], {}, words, sizes={}, second=True)
    assert "best dense cosine 0.860 < 0.89" in judged.reason()


def test_the_clause_asked_for_is_relevant_whatever_its_scores_and_only_it() -> None:
    hits = [hit(dense=0.1), hit(dense=0.9)]
    assert FLOOR.judge(hits, {}, ["t"], sizes={}, asked=[True, False]).marks == [True, True]
    assert FLOOR.judge(hits, {}, ["t"], sizes={}, asked=[False, False]).marks == [False, True]
