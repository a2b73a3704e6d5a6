"""Undated hits kept by an implied time filter rank after dated matches as relevant (search/soft.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from indexers.records import StoredChunk
from indexers.tiers.query import Filters, Range
from rag_router.search.fuse import Hit
from rag_router.search.soft import rank_undated_after

SOFT = Filters(
    "t", date=Range(gte=dt.date(2024, 1, 1)), year=Range(gte=2024), or_missing=frozenset({"year", "date"})
)


def _hit(doc_id: str, score: float, **metadata: Any) -> Hit:
    return Hit(StoredChunk(f"{doc_id}#0", doc_id, "text", None, metadata, "h"), score, "hot", {})


def test_an_undated_hit_ranks_after_a_dated_one_as_relevant() -> None:
    reasons: list[str] = []
    hits = [_hit("undated", 1.0), _hit("dated", 1.0, date="2025-01-01"), _hit("year-only", 0.9, year=2024)]
    ranked = rank_undated_after(hits, SOFT, 0.8, reasons)
    assert [h.doc_id for h in ranked] == ["dated", "year-only", "undated"]
    assert ranked[-1].score == 0.8 and "1 undated hit(s)" in reasons[0]


def test_a_much_more_relevant_undated_hit_stays_first() -> None:
    ranked = rank_undated_after([_hit("undated", 1.0), _hit("dated", 0.3, date="2025-01-01")], SOFT, 0.8, [])
    assert [h.doc_id for h in ranked] == ["undated", "dated"]


def test_unchanged_when_nothing_is_dated_or_the_filter_is_hard() -> None:
    reasons: list[str] = []
    undated = [_hit("a", 1.0), _hit("b", 0.5)]
    assert rank_undated_after(undated, SOFT, 0.8, reasons) == undated and reasons == []
    mixed = [_hit("undated", 1.0), _hit("dated", 1.0, date="2025-01-01")]
    hard = Filters("t", date=Range(gte=dt.date(2024, 1, 1)))
    assert rank_undated_after(mixed, hard, 0.8, reasons) == mixed and reasons == []
