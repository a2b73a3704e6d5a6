"""The question's instructions are not search terms (issue 33, item 3): the cut, and the
features read from what is left (no clause, year or identifier out of "不超过30字")."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from rag_router.search.features import extract
from rag_router.search.filters import parse_filters
from rag_router.search.instructions import strip_instructions
from rag_router.search.route import Policy, plan

CASES = yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "data" / "instructions.yaml").read_text("utf-8")
)
TODAY = dt.date(2026, 11, 30)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["q"])
def test_the_searched_text(case: dict[str, Any]) -> None:
    assert strip_instructions(case["q"]) == case["searched"]


@pytest.mark.parametrize(
    "query",
    [
        "员工生病请假需要什么证明？不超过30字",
        "员工手册关于加班的规定是什么？用JSON回答，字段为 answer 和 article",
        "What happened? Answer in 2020 words or less",
        "What does Article 5 say? Reply as JSON with fields answer, article",
    ],
)
def test_instructions_yield_no_features(query: str) -> None:
    features = extract(query, today=TODAY)
    assert features.years == () and features.date_range is None and features.identifiers == ()
    assert [c.text for c in features.clauses] == (["Article 5"] if "Article 5" in query else [])
    assert features.instructions and features.searched_text != query
    assert features.to_json()["searched_text"] == features.searched_text


def test_a_clause_in_the_question_is_still_a_clause() -> None:
    features = extract("第三十条规定了什么？不超过30字", today=TODAY)
    assert [c.number for c in features.clauses] == [30]
    route = plan(
        features,
        "auto",
        parse_filters(None, "default"),
        policy=Policy.load(),
        today=TODAY,
        hot_window_days=365,
    )
    assert route.filters.keywords == {"article": ("30",)} and route.searched == "第三十条规定了什么？"
