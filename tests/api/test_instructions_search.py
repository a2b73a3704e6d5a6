"""The question's instructions are not searched, end to end through the real app (issue 33, item 3).

"不超过30字" must not match a late-arrival rule through "超过" nor UDHR Article 30 through "30";
"字段为 answer 和 article" must not lift Article 3; the route shows the text that was searched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from tests.conftest import loaded_app

DOCS: list[dict[str, Any]] = [
    {"id": "sick-leave", "title": "病假规定", "text": "员工生病请假，须提交医院出具的诊断证明和病假单。"},
    {"id": "late", "title": "迟到规定", "text": "上班迟到超过30分钟的，按旷工半天处理。"},
    {"id": "overtime", "title": "加班规定", "text": "员工手册：加班须经部门负责人批准，按规定支付加班费。"},
    {
        "id": "udhr-30",
        "title": "UDHR Article 30",
        "text": "Nothing in this Declaration may be read as a right to destroy these rights.",
        "metadata": {"article": 30},
    },
    {
        "id": "udhr-3",
        "title": "UDHR Article 3",
        "text": "Everyone has the right to life, liberty and security of person.",
        "metadata": {"article": 3},
    },
    {
        "id": "remote",
        "title": "Remote work policy",
        "text": "Remote employees must use the VPN and keep their laptops encrypted for security.",
    },
]


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder
) -> Iterator[TestClient]:
    with loaded_app(tmp_path_factory.mktemp("instructions"), embedder, DOCS) as c:
        yield c


def _search(client: TestClient, query: str) -> dict[str, Any]:
    r = client.post("/v1/search", json={"query": query, "top_k": 5})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _matched(r: dict[str, Any]) -> list[str]:
    """The hits a leg of weight > 0 found (not zero-weight fill-ins)."""
    return [h["doc_id"] for h in r["hits"] if h["score"] > 0]


def test_a_length_limit_is_not_searched(client: TestClient) -> None:
    r = _search(client, "员工生病请假需要什么证明？不超过30字")
    matched = _matched(r)
    assert "udhr-30" not in matched, matched  # "30" is no search term
    assert matched[0] == "sick-leave", matched
    assert r["route"]["features"]["searched_text"] == "员工生病请假需要什么证明？"
    assert r["route"]["features"]["instructions"] == ["不超过30字"]


def test_json_fields_are_not_searched(client: TestClient) -> None:
    r = _search(client, "员工手册关于加班的规定是什么？用JSON回答，字段为 answer 和 article")
    matched = _matched(r)
    assert matched[0] == "overtime" and "udhr-3" not in matched, matched
    assert r["route"]["features"]["clauses"] == [] and r["route"]["filters"] == {}


@pytest.mark.parametrize(
    ("query", "searched"),
    [
        (
            "What does the remote work policy say about security? in one sentence",
            "What does the remote work policy say about security?",
        ),
        (
            "What does the remote work policy say about security? Answer in three bullet points.",
            "What does the remote work policy say about security?",
        ),
    ],
)
def test_the_route_shows_the_searched_text(client: TestClient, query: str, searched: str) -> None:
    r = _search(client, query)
    assert r["route"]["features"]["searched_text"] == searched
    assert r["hits"][0]["doc_id"] == "remote"
