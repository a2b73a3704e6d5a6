"""``GET /v1/documents``: the two tiers' documents in one list, by id, a page at a time.

Documents are written straight into the app's embedded tiers with made-up vectors: listing
reads no vector, and 10,000 documents through the embedding model would take minutes here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.records import DOC_HASH, KEYWORD_FIELDS, Chunk, EmbeddedChunk
from rag_router.api import create_app
from rag_router.client import Client
from rag_router.listing import decode_cursor, encode_cursor
from rag_router.services import Services
from rag_router.settings import Settings

KEYS = {"default": "k-default-7f1", "acme": "k-acme-7f1"}


def chunks(doc_id: str, n: int = 1, *, tenant: str = "default", **meta: Any) -> list[EmbeddedChunk]:
    vector = np.full(384, 384**-0.5, dtype=np.float32)
    title = meta.pop("title", None)
    return [
        EmbeddedChunk(
            Chunk(f"{doc_id}#{i}", doc_id, i, f"{doc_id} text {i}", title, dict(meta), tenant), vector
        )
        for i in range(n)
    ]


@pytest.fixture
def client(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path, api_keys=[KEYS["default"], f"acme:{KEYS['acme']}"])  # type: ignore[list-item]
    with TestClient(create_app(settings, embedder=embedder)) as c:
        c.headers["Authorization"] = f"Bearer {KEYS['default']}"
        yield c


def write(client: TestClient, tier: str, items: list[EmbeddedChunk]) -> None:
    """Into one of the running app's tiers, on the app's own event loop."""
    services: Services = client.app.state.services  # type: ignore[attr-defined]
    assert client.portal is not None
    client.portal.call(services.tiers[tier].upsert, items)  # type: ignore[index]


def test_both_tiers_in_one_list_with_user_metadata_only(client: TestClient) -> None:
    write(client, "hot", chunks("n1", 2, title="New", date="2026-01-02", source="web", **{DOC_HASH: "x"}))
    write(client, "cold", chunks("o1", title="Old", date="2001-05-06", source="mail", article=3))
    # mid-retier: in both tiers, the cold copy not yet whole
    write(client, "hot", chunks("m1", 3, title="Moving", date="2002-01-01"))
    write(client, "cold", chunks("m1", 2, title="Moving", date="2002-01-01"))
    body = client.get("/v1/documents").json()
    assert body == {
        "documents": [
            {
                "id": "m1",
                "title": "Moving",
                "tiers": ["hot", "cold"],
                "chunks": 3,
                "date": "2002-01-01",
                "source": None,
                "metadata": {"date": "2002-01-01"},
            },
            {
                "id": "n1",
                "title": "New",
                "tiers": ["hot"],
                "chunks": 2,
                "date": "2026-01-02",
                "source": "web",
                "metadata": {"date": "2026-01-02", "source": "web"},  # no doc_hash: not the user's
            },
            {
                "id": "o1",
                "title": "Old",
                "tiers": ["cold"],
                "chunks": 1,
                "date": "2001-05-06",
                "source": "mail",
                "metadata": {"date": "2001-05-06", "source": "mail", "article": 3},
            },
        ],
        "next_cursor": None,
        "total": 4,  # m1 counts in each tier while it moves (the documented exception)
    }
    assert [d["id"] for d in client.get("/v1/documents", params={"tier": "cold"}).json()["documents"]] == [
        "m1",
        "o1",
    ]
    only = client.get("/v1/documents", params={"source": "mail", "title_prefix": "OL"}).json()
    assert [d["id"] for d in only["documents"]] == ["o1"] and only["total"] == 1
    dated = client.get("/v1/documents", params={"date_gte": "2002-01-01", "date_lte": "2030-01-01"}).json()
    assert [d["id"] for d in dated["documents"]] == ["m1", "n1"]


def test_documents_are_the_callers_tenants_only(client: TestClient) -> None:
    write(client, "hot", chunks("mine"))
    write(client, "cold", chunks("theirs", tenant="acme") + chunks("mine", 2, tenant="acme"))
    mine = client.get("/v1/documents").json()
    theirs = client.get("/v1/documents", headers={"Authorization": f"Bearer {KEYS['acme']}"}).json()
    assert [(d["id"], d["tiers"], d["chunks"]) for d in mine["documents"]] == [("mine", ["hot"], 1)]
    assert [(d["id"], d["tiers"]) for d in theirs["documents"]] == [("mine", ["cold"]), ("theirs", ["cold"])]
    assert (mine["total"], theirs["total"]) == (1, 2)
    assert client.get("/v1/documents", headers={"Authorization": "Bearer nope"}).status_code == 401


@pytest.mark.parametrize(
    ("params", "mentions"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"tier": "warm"}, "tier"),
        ({"date_gte": "2020-13-01"}, "date_gte"),
        ({"date_gte": "0"}, "date_gte"),  # lax pydantic read it as Unix time 0 (schemathesis found it)
        ({"date_lte": "1700000000"}, "date_lte"),
        ({"date_gte": "2021-01-01", "date_lte": "2020-01-01"}, "after date_lte"),
        ({"cursor": "%%%"}, "cursor"),
        ({"cursor": "_w"}, "cursor"),  # b"\xff": no UTF-8
        ({"cursor": "eB"}, "cursor"),  # "x" spelled otherwise: not one this service gave
        ({"title_prefix": ""}, "title_prefix"),
    ],
)
def test_bad_parameters_get_the_422_envelope(
    client: TestClient, params: dict[str, Any], mentions: str
) -> None:
    r = client.get("/v1/documents", params=params)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert set(err) == {"code", "message", "type", "request_id"} and mentions in err["message"]


def test_the_cursor_round_trips_any_id() -> None:
    for doc_id in ("a", "a/b c#1?", "中华人民共和国", "é\u0301", "x" * 300):
        assert decode_cursor(encode_cursor(doc_id)) == doc_id


def test_ten_thousand_documents_page_stably_while_others_are_written(client: TestClient) -> None:
    """10,000 documents over both tiers, 500 a page; between pages documents are written before
    and after the cursor: every original is listed once, in order, and none is skipped."""
    ids = [f"doc-{i:05d}" for i in range(10_000)]
    write(client, "hot", [c for d in ids[::2] for c in chunks(d)])
    write(client, "cold", [c for d in ids[1::2] for c in chunks(d)])
    write(client, "cold", chunks("doc-00000"))  # one mid-retier: one row, both tiers
    write(client, "hot", chunks("doc-00001", tenant="acme"))  # another tenant's: never listed
    api = Client(client)
    seen: list[dict[str, Any]] = []
    page = api.documents(limit=500)
    assert page["total"] == 10_001  # the moving one counts in each tier
    for step in range(100):
        seen += page["documents"]
        if page["next_cursor"] is None:
            break
        last = page["documents"][-1]["id"]
        write(client, "hot", chunks(f"{last}-after{step}") + chunks(f"doc-0000{step % 10}-before"))
        page = api.documents(limit=500, cursor=page["next_cursor"])
    listed = [d["id"] for d in seen]
    assert [d for d in listed if d in set(ids)] == ids  # each original once, in order
    assert len(listed) == len(set(listed))
    assert sum(1 for d in listed if "-after" in d) == 20  # written after the cursor: listed later
    assert next(d for d in seen if d["id"] == "doc-00000")["tiers"] == ["hot", "cold"]


def test_cli_documents_list_prints_a_line_a_document_and_the_next_page(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from rag_router.cli import app, store

    monkeypatch.setattr(store, "with_client", lambda url, run: run(Client(client)))
    write(client, "hot", chunks("a/1", 2, title="Alpha", date="2020-01-01") + chunks("b", title="Beta"))
    write(client, "cold", chunks("c"))
    first = CliRunner().invoke(app, ["documents", "list", "--limit", "2"])
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines() == ["a/1\thot\t2\t2020-01-01\tAlpha", "b\thot\t1\t-\tBeta"]
    assert "2 of 3 documents; next page: --cursor " in first.stderr
    cursor = first.stderr.split("--cursor ")[1].split()[0]
    rest = CliRunner().invoke(app, ["documents", "list", "--cursor", cursor, "--json"])
    assert [d["id"] for d in json.loads(rest.stdout)["documents"]] == ["c"]
    titled = CliRunner().invoke(app, ["documents", "list", "--tier", "hot", "--title-prefix", "be"])
    assert titled.stdout.splitlines() == ["b\thot\t1\t-\tBeta"]


def test_the_search_filter_description_names_every_keyword_field() -> None:
    """The OpenAPI text of `filters` once left out `amendment`: it now comes from the key table."""
    schema = create_app(Settings(data_dir=Path("/nonexistent"))).openapi()
    text = schema["components"]["schemas"]["SearchRequest"]["properties"]["filters"]["description"]
    assert all(key in text for key in KEYWORD_FIELDS)


def test_delete_where_removes_every_match_in_both_tiers_and_only_the_callers(client: TestClient) -> None:
    write(client, "hot", chunks("s1", 2, dataset="sample", tags=["a", "b"]))
    write(client, "cold", chunks("s2", dataset="sample"))
    write(client, "hot", chunks("m1", 2, dataset="sample"))
    write(client, "cold", chunks("m1", 1, dataset="sample"))  # mid-retier: in both tiers
    write(client, "hot", chunks("mine", dataset="own"))
    write(client, "cold", chunks("theirs", tenant="acme", dataset="sample"))  # another tenant's
    tagged = client.delete("/v1/documents", params={"where": ["dataset=sample", "tags=b"]})
    assert tagged.status_code == 200 and tagged.json()["deleted_documents"] == 1  # every pair holds
    gone = client.delete("/v1/documents", params={"where": "dataset=sample"})
    assert gone.status_code == 200, gone.text
    assert gone.json() == {"where": {"dataset": "sample"}, "deleted_documents": 2, "deleted_chunks": 4}
    assert [d["id"] for d in client.get("/v1/documents").json()["documents"]] == ["mine"]
    acme = {"Authorization": f"Bearer {KEYS['acme']}"}
    assert [d["id"] for d in client.get("/v1/documents", headers=acme).json()["documents"]] == ["theirs"]
    none = client.delete("/v1/documents", params={"where": "dataset=sample"})
    assert none.json()["deleted_documents"] == 0


@pytest.mark.parametrize("page", [None, 500])
def test_delete_where_writes_each_tier_once_a_page_of_documents(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, page: int | None
) -> None:
    """1,200 matching documents: one delete per tier with the default page (5,000), three of 500
    each; every match is gone either way and the rest stays."""
    from rag_router.api.routes import documents

    if page is not None:
        monkeypatch.setattr(documents, "DELETE_PAGE", page)
    write(client, "cold", [c for i in range(1200) for c in chunks(f"d{i:04d}", dataset="x")])
    write(client, "cold", chunks("keep", dataset="y"))
    services: Services = client.app.state.services  # type: ignore[attr-defined]
    cold = services.tiers["cold"]
    calls: list[int] = []
    real = cold.delete

    async def counted(tenant: str, chunk_ids: list[str]) -> None:
        calls.append(len(chunk_ids))
        await real(tenant, chunk_ids)

    monkeypatch.setattr(cold, "delete", counted)
    gone = client.delete("/v1/documents", params={"where": "dataset=x"})
    assert gone.status_code == 200, gone.text
    assert gone.json()["deleted_documents"] == 1200
    assert calls == ([1200] if page is None else [500, 500, 200])
    assert [d["id"] for d in client.get("/v1/documents").json()["documents"]] == ["keep"]


@pytest.mark.parametrize("params", [{}, {"where": "dataset"}, {"where": "=sample"}])
def test_delete_where_without_a_pair_is_refused(client: TestClient, params: dict[str, str]) -> None:
    write(client, "hot", chunks("keep", dataset="sample"))
    response = client.delete("/v1/documents", params=params)
    assert response.status_code == 422 and response.json()["error"]["message"], response.text
    assert client.get("/v1/documents").json()["total"] == 1  # nothing deleted


def test_cli_delete_where(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from rag_router.cli import app, store

    write(client, "hot", chunks("s1", dataset="sample"))
    write(client, "hot", chunks("kept"))
    monkeypatch.setattr(store, "with_client", lambda url, run: run(Client(client)))
    result = CliRunner().invoke(app, ["documents", "delete", "--where", "dataset=sample"])
    assert result.exit_code == 0 and "deleted 1 document (1 chunk)" in result.stdout, result.output
    both = CliRunner().invoke(app, ["documents", "delete", "kept", "--where", "dataset=sample"])
    assert both.exit_code == 2 and "not both" in both.output
