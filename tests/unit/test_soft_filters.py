"""Soft (implied) time filters in every tier's filter language: "in range, or no such field".

The embedded tiers are exercised end to end by the contract suite
(tests/contract/test_tiers.py::test_soft_time_filters_keep_undated_chunks_and_drop_those_dated_outside);
the server adapters' bodies are checked here, since their servers are not always at hand.
"""

from __future__ import annotations

import datetime as dt

import pytest
from qdrant_client import models

from indexers.tiers import elastic, qdrant_server
from indexers.tiers.cold_store import filter_sql
from indexers.tiers.query import Filters, Range


def test_elastic_soft_range_accepts_a_missing_field() -> None:
    filters = Filters(
        "t", year=Range(gte=2024), date=Range(gte=dt.date(2024, 1, 1)), or_missing=frozenset({"date"})
    )
    year, date = elastic.to_filter(filters)[1:]
    assert year == {"range": {"year": {"gte": 2024}}}  # hard: not in or_missing
    assert date == {
        "bool": {
            "should": [
                {"range": {"date": {"gte": "2024-01-01"}}},
                {"bool": {"must_not": [{"exists": {"field": "date"}}]}},
            ],
            "minimum_should_match": 1,
        }
    }


def test_qdrant_server_soft_range_is_a_nested_should_with_is_empty() -> None:
    filters = Filters("t", year=Range(gte=2024), or_missing=frozenset({"year"}))
    spelled = qdrant_server.to_filter(filters)
    assert spelled.must is not None and len(spelled.must) == 2
    nested = spelled.must[1]
    assert isinstance(nested, models.Filter) and nested.should is not None
    inside, empty = nested.should  # type: ignore[misc]
    assert isinstance(inside, models.FieldCondition) and inside.range == models.Range(gte=2024)
    assert empty == models.IsEmptyCondition(is_empty=models.PayloadField(key="year"))


def test_sqlite_soft_range_accepts_null() -> None:
    where, args = filter_sql(
        Filters("t", date=Range(gte=dt.date(2024, 1, 1)), or_missing=frozenset({"date"}))
    )
    assert where == "tenant = ? AND (day IS NOT NULL AND day >= ? OR day IS NULL)"
    assert args == ["t", 20240101]


def test_only_range_fields_can_be_soft() -> None:
    with pytest.raises(ValueError, match="or_missing"):
        Filters("t", keywords={"article": ("3",)}, or_missing=frozenset({"article"}))
