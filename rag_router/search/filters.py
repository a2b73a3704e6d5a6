"""Request filters (plain JSON) → validated domain ``Filters``. Pure.

Every field must be filterable in every tier; anything else is rejected, never ignored.

    {"year": 2020 | {"gte": 2019, "lte": 2021}, "date": {"gte": "2020-01-01"},
     "tags": ["a"], "doc_id": ["x"], "<keyword field>": value | [values]}
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from indexers.records import FILTERABLE_FIELDS, KEYWORD_FIELDS
from indexers.tiers.query import Filters, Range
from rag_router.errors import InvalidRequest

_RANGE_KEYS = {"gte", "lte", "gt", "lt"}


def parse_filters(raw: Mapping[str, Any] | None, tenant: str) -> Filters:
    raw = raw or {}
    unknown = sorted(set(raw) - FILTERABLE_FIELDS)
    if unknown:
        raise InvalidRequest(
            f"filter field(s) {', '.join(unknown)} are not filterable; "
            f"filterable: {', '.join(sorted(FILTERABLE_FIELDS))}"
        )
    keywords: dict[str, tuple[str, ...]] = {}
    for key in sorted((KEYWORD_FIELDS | {"tags", "doc_id"}) & set(raw)):
        keywords[key] = _values(key, raw[key])
    return Filters(
        tenant=tenant,
        year=_range("year", raw["year"], _year) if "year" in raw else None,
        date=_range("date", raw["date"], _date) if "date" in raw else None,
        keywords=keywords,
    )


def _values(key: str, value: Any) -> tuple[str, ...]:
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
        raise InvalidRequest(f"filter {key!r} takes a string or number, or a non-empty list of them")
    return tuple(str(v) for v in values)


def _range(key: str, value: Any, convert: Any) -> Range:
    if not isinstance(value, dict):
        point = convert(key, value)
        return Range(gte=point, lte=point)
    unknown = set(value) - _RANGE_KEYS
    if unknown or not value:
        raise InvalidRequest(f"filter {key!r} takes a value or a range with gte/lte/gt/lt")
    bounds = {k: convert(key, v) for k, v in value.items()}
    return Range(**bounds)


def _year(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"filter {key!r} takes integer years")
    return value


def _date(key: str, value: Any) -> dt.date:
    try:
        return dt.date.fromisoformat(str(value)[:10])
    except ValueError:
        raise InvalidRequest(f"filter {key!r} takes ISO dates (YYYY-MM-DD), got {value!r}") from None


def filters_to_json(filters: Filters) -> dict[str, Any]:
    """The filters as applied, for the response's ``route.filters``."""
    out: dict[str, Any] = {key: list(values) for key, values in filters.keywords.items()}
    for key, r in (("year", filters.year), ("date", filters.date)):
        if r is not None:
            out[key] = {
                name: (v.isoformat() if isinstance(v, dt.date) else v)
                for name, v in (("gte", r.gte), ("lte", r.lte), ("gt", r.gt), ("lt", r.lt))
                if v is not None
            }
            if filters.soft(key):  # implied from the query: a document without the field passes
                out[key]["or_missing"] = True
    return out
