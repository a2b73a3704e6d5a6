"""Implied time filters stay soft, end to end through the real app (issue 33, item 2).

A time the router reads from the query ("2023年以后", "近三年", "last year") must not drop a
document that carries no date (one dated only in its text): it is found, ranked after a dated
match that is as relevant. A document dated outside the range is still left out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from tests.conftest import loaded_app

TODAY = dt.date.today()
RECENT = (TODAY - dt.timedelta(days=30)).isoformat()
OLD = f"{TODAY.year - 8}-03-01"
PRIVACY = "Personal data may be processed only for a stated purpose and kept no longer than needed."
DOCS: list[dict[str, Any]] = [
    # undated: their time is only in their text
    {"id": "carbon-news", "text": "2024年以来，全国碳排放总量下降了百分之三，碳排放交易市场继续扩大。"},
    {"id": "attendance", "text": "考勤规定：员工每天上午九点前打卡，迟到三次扣除全勤奖。"},
    {"id": "revenue", "text": "Annual report: revenue growth was 12 percent, driven by cloud sales."},
    {"id": "privacy-undated", "text": PRIVACY},
    # dated inside every range the tests name
    {"id": "safety", "text": "安全生产规则：进入车间必须佩戴安全帽。", "metadata": {"date": RECENT}},
    {"id": "privacy-dated", "text": PRIVACY, "metadata": {"date": RECENT}},
    # dated outside: still filtered out
    {"id": "carbon-old", "text": "碳排放情况通报：碳排放总量上升。", "metadata": {"date": OLD}},
]


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder
) -> Iterator[TestClient]:
    with loaded_app(tmp_path_factory.mktemp("implied"), embedder, DOCS) as c:
        yield c


def _search(client: TestClient, query: str, **body: Any) -> dict[str, Any]:
    r = client.post("/v1/search", json={"query": query, "top_k": 5, **body})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("query", "doc_id"),
    [
        ("2023年以后的碳排放情况", "carbon-news"),
        ("近三年的考勤规定", "attendance"),
        ("revenue growth last year", "revenue"),
    ],
)
def test_a_document_without_a_date_is_found_by_an_implied_time_filter(
    client: TestClient, query: str, doc_id: str
) -> None:
    r = _search(client, query)
    assert r["route"]["filters"]["date"]["or_missing"] is True, r["route"]
    top = r["hits"][0]
    assert top["doc_id"] == doc_id, r["route"]["reason"]
    assert top["score"] > 0  # a real match, not a zero-weight dense fill-in
    assert "carbon-old" not in {h["doc_id"] for h in r["hits"]}  # dated outside the range


def test_a_dated_match_ranks_before_an_undated_one_as_relevant(client: TestClient) -> None:
    r = _search(client, f"{PRIVACY} since {TODAY.year - 1}")
    ids = [h["doc_id"] for h in r["hits"]]
    assert ids.index("privacy-dated") < ids.index("privacy-undated"), r["route"]["reason"]
    assert "undated hit(s) kept by the implied time filter" in r["route"]["reason"]


def test_a_request_time_filter_stays_hard(client: TestClient) -> None:
    r = _search(client, "碳排放情况", filters={"date": {"gte": f"{TODAY.year - 1}-01-01"}})
    assert {h["doc_id"] for h in r["hits"]} <= {"safety", "privacy-dated"}
