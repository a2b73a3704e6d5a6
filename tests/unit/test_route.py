"""Routing decisions from a data table (tests/data/routes.yaml); the policy is prompts/routing.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rag_router.search.features import extract
from rag_router.search.filters import filters_to_json, parse_filters
from rag_router.search.route import Policy, plan

TABLE = yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "data" / "routes.yaml").read_text(encoding="utf-8")
)
POLICY = Policy.load()


@pytest.mark.parametrize("case", TABLE["cases"], ids=lambda c: c["q"])
def test_route(case: dict[str, Any]) -> None:
    today = TABLE["today"]
    route = plan(
        extract(case["q"], today=today),
        case.get("route", "auto"),
        parse_filters(case.get("explicit"), "default"),
        policy=POLICY,
        today=today,
        hot_window_days=TABLE["hot_window_days"],
    )
    assert list(route.tiers) == case["tiers"], route.reason
    assert route.cascade == case.get("cascade", False), route.reason
    assert filters_to_json(route.filters) == case["filters"], route.reason
    if "lexical" in case:
        assert route.weights["lexical"] == case["lexical"]
    if "reason" in case:
        assert case["reason"] in route.reason
    assert route.reason


def test_the_table_covers_every_decision() -> None:
    cases = TABLE["cases"]
    assert len(cases) >= 40
    assert {tuple(c["tiers"]) for c in cases} == {("hot",), ("cold",), ("hot", "cold")}
    assert any(c.get("cascade") for c in cases) and any("explicit" in c for c in cases)


def test_a_backwards_range_is_reported_in_the_reason() -> None:
    today = TABLE["today"]
    route = plan(
        extract("trends 2021–2019", today=today),
        "auto",
        parse_filters(None, "default"),
        policy=POLICY,
        today=today,
        hot_window_days=365,
    )
    assert "backwards" in route.reason and route.tiers == ("hot", "cold")  # undated documents are hot


def test_policy_is_data() -> None:
    assert 0.0 < POLICY.cascade_min_score < 1.0
    assert POLICY.weights_for("clause")["lexical"] > POLICY.weights_for("default")["lexical"]
