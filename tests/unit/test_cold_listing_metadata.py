"""The embedded cold tier narrows a listing by metadata pairs in SQL (``DocumentQuery.metadata``).

A delete by filter walked every page of the list and tested metadata in Python: at 10M chunks,
minutes of pages for 1 % of the store (bench/scale.py). The tier's SQL may keep documents that
Python then rejects (booleans, reals: their text differs), never drop one that Python keeps."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from indexers.records import Chunk, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers.listing import DocumentQuery
from indexers.tiers.local_cold import LocalCold
from indexers.tiers.query import Filters
from rag_router.listing import metadata_matches

STORED: dict[str, dict[str, Any]] = {
    "str": {"batch": "b01"},
    "longer": {"batch": "b011"},
    "list": {"batch": ["x", "b01"]},
    "int": {"batch": 1},
    "bool": {"batch": True},
    "real": {"batch": 1.5},
    "null": {"batch": None},
    "missing": {},
    "nested": {"batch": {"a": 1}},
    "dotted": {"a.b": "v"},
    "quoted": {'say "hi"': "v"},
    "中文": {"部门": "法务"},
}


def chunk(doc_id: str, metadata: dict[str, Any]) -> EmbeddedChunk:
    vector = np.full(4, 0.5, dtype=np.float32)
    return EmbeddedChunk(Chunk(f"{doc_id}#0", doc_id, 0, f"text of {doc_id}", None, metadata), vector)


@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory) -> LocalCold:
    tier = LocalCold(tmp_path_factory.mktemp("cold") / "cold", dim=4, analyzer=Analyzer())
    tier.upsert([chunk(d, m) for d, m in STORED.items()])
    return tier


def listed(cold: LocalCold, where: dict[str, str]) -> set[str]:
    page = cold.documents(DocumentQuery(Filters("default"), metadata=where, limit=100))
    assert page.total == len(page.documents)  # the total counts what the filter admits
    return {d.doc_id for d in page.documents}


@pytest.mark.parametrize(
    ("where", "narrowed_to"),
    [
        ({"batch": "b01"}, {"str", "list"}),
        ({"batch": "1"}, {"int"}),
        ({"batch": "True"}, {"bool"}),
        ({"a.b": "v"}, {"dotted"}),
        ({"部门": "法务"}, {"中文"}),
        ({"batch": "b01", "a.b": "v"}, set()),
    ],
)
def test_sql_keeps_every_match_and_drops_plain_mismatches(
    cold: LocalCold, where: dict[str, str], narrowed_to: set[str]
) -> None:
    got = listed(cold, where)
    python = {d for d, m in STORED.items() if metadata_matches(m, where)}
    assert python == narrowed_to
    assert python <= got  # never drops one that matches
    # strings and integers are decided in SQL; what else stays has a boolean, real or object value
    assert all(d in python or d in {"bool", "real", "nested"} for d in got)
    assert "longer" not in got and "missing" not in got and "null" not in got


def test_a_key_sql_cannot_name_is_left_to_the_caller(cold: LocalCold) -> None:
    assert listed(cold, {'say "hi"': "v"}) == set(STORED)  # not narrowed, and no error
