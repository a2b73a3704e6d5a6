from __future__ import annotations

import datetime as dt

import pytest

from indexers.tiers.query import Range
from rag_router.errors import InvalidRequest
from rag_router.search.filters import filters_to_json, parse_filters


def test_parse_every_kind() -> None:
    f = parse_filters(
        {
            "year": {"gte": 2019, "lt": 2022},
            "date": {"gte": "2020-01-01"},
            "tags": ["a", "b"],
            "doc_id": "x",
            "article": 17,
        },
        tenant="acme",
    )
    assert f.tenant == "acme"
    assert f.year == Range(gte=2019, lt=2022)
    assert f.date == Range(gte=dt.date(2020, 1, 1))
    assert f.keywords == {"tags": ("a", "b"), "doc_id": ("x",), "article": ("17",)}
    assert filters_to_json(f)["date"] == {"gte": "2020-01-01"}


def test_a_scalar_year_is_an_exact_range() -> None:
    assert parse_filters({"year": 2020}, "default").year == Range(gte=2020, lte=2020)


@pytest.mark.parametrize(
    "raw",
    [
        {"colour": "red"},
        {"year": "2020"},
        {"year": True},
        {"year": {"from": 2020}},
        {"year": {}},
        {"date": "31/12/2020"},
        {"tags": []},
        {"tags": [{"a": 1}]},
        {"article": None},
    ],
)
def test_rejects_what_no_tier_can_apply(raw: dict[str, object]) -> None:
    with pytest.raises(InvalidRequest):
        parse_filters(raw, "default")
