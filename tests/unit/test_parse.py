"""Robust JSON and citations on what models really emit."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rag_router.answer.parse import parse_citations, parse_json

CORPUS: list[dict[str, Any]] = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "data" / "malformed_json.jsonl")
    .read_text(encoding="utf-8")
    .splitlines()
]


def test_the_malformed_corpus_parses_to_the_intended_object() -> None:
    assert len(CORPUS) >= 100
    misses = Counter()
    for case in CORPUS:
        parsed = parse_json(case["raw"])  # never raises
        if parsed.value != case["expected"]:
            misses[case["kind"]] += 1
            assert parsed.value is None or parsed.error is None
    rate = 1 - sum(misses.values()) / len(CORPUS)
    assert rate >= 0.95, (rate, misses)


@pytest.mark.parametrize(
    "raw", ["", "no json at all", "[1, 2, 3]", "{}", "{{{{", "}{", '"just a string"', "null"]
)
def test_unparseable_outputs_are_reported_not_raised(raw: str) -> None:
    parsed = parse_json(raw)
    assert parsed.value is None and parsed.error


@pytest.mark.parametrize(
    ("text", "n", "numbers", "dropped"),
    [
        ("A [1]. B [2, 3]. C [4-5].", 5, [1, 2, 3, 4, 5], []),
        ("A [2]. B [9]. C [0].", 3, [2], [9, 0]),
        ("Both [1][3] and again [1].", 3, [1, 3], []),
        ("Full-width ［2］ and 【3】 brackets, range [1–2].", 3, [2, 3, 1], []),
        ("No citations here, just [note] and [a1].", 3, [], []),
        ("Reversed range [3-1] is kept as its ends.", 3, [3, 1], []),
    ],
)
def test_citations(text: str, n: int, numbers: list[int], dropped: list[int]) -> None:
    cited = parse_citations(text, n)
    assert cited.numbers == numbers and cited.dropped == dropped
