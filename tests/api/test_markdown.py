"""Markdown files through the real app: what is stored is the file, byte for byte (front matter
and headings too), its first heading names it, and a code's name in a query finds its articles."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from rag_router.api import create_app
from rag_router.settings import Settings

NOTES = (
    "---\ntitle: Release notes\ndate: 2019-03-04\ntags: [release, api]\n---\n"
    "# Version 2.0\n\nThe search endpoint now returns the route it took.\r\n\n"
    "## Fixes\n\n* Uploads keep their folders.\n"
)
HANDBOOK = (
    "# 员工手册\n\n"
    "第一条 员工应当按时上班，不得迟到早退。\n"
    "第二条 员工应当诚实守信，保守公司秘密。\n"
    "第三条 员工每年享有带薪年假十天，由部门统一安排。\n"
)
CONTRACT_LAW = (
    "# 劳动合同法\n\n第一条 为了完善劳动合同制度，制定本法。\n"
    "第三条 订立劳动合同，应当遵循合法、公平的原则。\n"
)


def wait(client: TestClient, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body: dict[str, Any] = client.get(f"/v1/ingest/jobs/{job_id}").json()
        if body["status"] in ("done", "failed"):
            return body
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder
) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("md"), chunk={"max_tokens": 64, "overlap_tokens": 0})
    files = [
        ("files", (name, text.encode("utf-8"), "text/markdown"))
        for name, text in (("notes.md", NOTES), ("handbook.md", HANDBOOK), ("contract.md", CONTRACT_LAW))
    ]
    with TestClient(create_app(settings, embedder=embedder)) as c:
        accepted = c.post("/v1/ingest/files", files=files, data={"tier": "cold"})
        assert accepted.status_code == 202, accepted.text
        body = wait(c, accepted.json()["job_id"])
        assert body["created"] == 3 and body["failed"] == 0, body
        yield c


def test_a_markdown_file_comes_back_byte_for_byte(client: TestClient) -> None:
    doc = client.get("/v1/documents/notes.md").json()
    assert doc["text"] == NOTES  # front matter, headings and the \r\n as the file has them
    assert doc["title"] == "Release notes"  # the front matter's title wins over the first heading
    meta = doc["chunks"][0]["metadata"]
    assert meta["date"] == "2019-03-04" and meta["tags"] == ["release", "api"]


def test_the_first_heading_titles_a_markdown_file_and_names_its_code(client: TestClient) -> None:
    doc = client.get("/v1/documents/handbook.md").json()
    assert doc["title"] == "员工手册" and doc["text"] == HANDBOOK
    chunks = doc["chunks"]
    assert [c["metadata"].get("article") for c in chunks] == [1, 2, 3]  # "# 员工手册" is no chunk alone
    assert {c["metadata"]["law"] for c in chunks} == {"员工手册"}


@pytest.mark.parametrize(
    ("query", "doc_id", "article"),
    [("员工手册第三条规定了什么？", "handbook.md", 3), ("劳动合同法第三条", "contract.md", 3)],
)
def test_a_code_named_by_its_heading_is_found_by_name_and_article(
    client: TestClient, query: str, doc_id: str, article: int
) -> None:
    r = client.post("/v1/search", json={"query": query, "top_k": 3}).json()
    reason = r["route"]["reason"]
    assert "nothing matched" not in reason and "dropped" not in reason, reason
    assert [(h["doc_id"], h["metadata"]["article"]) for h in r["hits"]] == [(doc_id, article)], reason
