"""What a clause question names, and whether a stored document is it (rag_router/search/named.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from indexers.text.lexical import Analyzer
from rag_router.search.features import extract
from rag_router.search.named import Missing, document_names, names_document

TODAY = dt.date(2026, 1, 1)


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("What does Section 3 of the travel policy say?", ["travel policy"]),
        ("Summarise Section 9 of the Driver and Fleet Safety Policy.", ["Driver and Fleet Safety Policy"]),
        ("travel policy section 8", ["travel policy"]),
        ("What is in Section 4 of the hybrid and remote work policy?", ["hybrid and remote work policy"]),
        ("What does Section 3 say?", []),  # "What does" is no name
        ("What does Section 2 of Article I say?", []),  # a clause is no document
        ("员工手册第二十条是什么内容？", ["员工手册"]),
        ("第九十九条规定了什么？", []),
        ("What does Article 17 GDPR say?", ["GDPR"]),
    ],
)
def test_the_name_a_clause_question_gives_its_document(query: str, names: list[str]) -> None:
    assert document_names(query, extract(query, today=TODAY)) == names


@pytest.mark.parametrize(
    ("name", "fields", "named"),
    [
        ("travel policy", ["Northwind Freight Business Travel Policy", None, "travel-policy"], True),
        ("Travel Policies", ["Northwind Freight Business Travel Policy"], True),  # stemmed
        ("remote work policy", ["Northwind Freight Business Travel Policy"], False),
        ("考勤管理办法", ["北风货运考勤管理办法"], True),
        ("刑法", ["中华人民共和国刑法 第二十条"], True),
        ("员工手册", ["北风货运考勤管理办法"], False),
        ("GDPR", ["Article 17 Right to erasure", None, "gdpr-art-17"], True),  # by its id
        ("employee handbook", ["北风货运员工手册"], False),
        ("", ["anything"], False),
    ],
)
def test_a_name_matches_a_document_by_its_title_law_or_id(
    name: str, fields: list[str | None], named: bool
) -> None:
    assert names_document(name, fields, Analyzer()) is named


def test_what_is_missing_reads_as_a_reason_and_as_json() -> None:
    missing = Missing("Section 12", "travel policy", "Northwind Freight Business Travel Policy", True)
    assert (
        missing.reason()
        == "Northwind Freight Business Travel Policy has no Section 12: nothing to answer from"
    )
    assert missing.to_json() == {
        "clause": "Section 12",
        "law": "travel policy",
        "document": "Northwind Freight Business Travel Policy",
        "stored": True,
    }
    assert "no stored document is named 'pension policy'" in Missing("Section 2", "pension policy").reason()
    assert Missing("第九十九条").reason().startswith("no stored chunk is 第九十九条")
