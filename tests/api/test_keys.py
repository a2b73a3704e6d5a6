"""API keys: hashed at rest, found in constant time, rotated through their file without a
restart, rate-limited per key, and never written to a log (nor is a document's text)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from indexers.embed.embedder import SentenceTransformerEmbedder
from rag_router.api import create_app
from rag_router.api.keys import KeyRing, hash_key, parse_entry
from rag_router.cli import app as cli
from rag_router.settings import Settings


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_entries_plain_and_hashed_name_the_same_key() -> None:
    plain, hashed = parse_entry("acme:k-1"), parse_entry("acme:" + hash_key("k-1"))
    assert plain == hashed and plain.tenant == "acme"
    assert parse_entry(hash_key("k-1")).tenant == "default"
    assert parse_entry("a:b:k").tenant == "a:b"  # the key is after the last colon
    ring = KeyRing(["acme:" + hash_key("k-1"), "k-2"])
    assert ring.find("k-1") == plain and ring.find("k-2") is not None
    assert ring.find(hash_key("k-1")) is None  # the stored digest is no credential
    assert ring.find("k-3") is None and ring.find("") is None
    assert "k-1" not in repr(ring.find("k-1")) and plain.label.startswith("acme/")


def test_hashed_keys_authenticate_and_give_their_tenant(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    settings = Settings(data_dir=tmp_path, api_keys=["acme:" + hash_key("k-acme"), hash_key("k-def")])  # type: ignore[list-item]
    with TestClient(create_app(settings, embedder=embedder)) as c:
        doc = {"documents": [{"id": "p1", "text": "Acme's private price list for 2026."}]}
        assert c.post("/v1/documents", json=doc, headers=bearer("k-acme")).status_code == 200
        assert c.get("/v1/documents/p1", headers=bearer("k-acme")).status_code == 200
        assert c.get("/v1/documents/p1", headers=bearer("k-def")).status_code == 404  # another tenant
        r = c.get("/v1/documents/p1", headers=bearer(hash_key("k-acme")))
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"


def test_keys_rotate_through_their_file_without_a_restart(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("# rotation test\nacme:old-key\n", encoding="utf-8")
    settings = Settings(data_dir=tmp_path / "data", api_keys_file=keys)
    app = create_app(settings, embedder=embedder)
    app.state.keys = KeyRing([], keys, recheck_s=0)  # re-read on every request, for the test
    with TestClient(app) as c:
        assert c.get("/v1/ingest/jobs", headers=bearer("old-key")).status_code == 200
        keys.write_text("acme:" + hash_key("new-key") + "\n", encoding="utf-8")
        assert c.get("/v1/ingest/jobs", headers=bearer("new-key")).status_code == 200
        assert c.get("/v1/ingest/jobs", headers=bearer("old-key")).status_code == 401
        keys.write_text("acme:sha256:not-hex\n", encoding="utf-8")  # a bad file keeps the keys in force
        assert c.get("/v1/ingest/jobs", headers=bearer("new-key")).status_code == 200


def test_a_key_over_its_rate_limit_gets_429_and_others_do_not(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    settings = Settings(data_dir=tmp_path, api_keys=["a:k-a", "b:k-b"], rate_limit="3/minute")  # type: ignore[list-item]
    with TestClient(create_app(settings, embedder=embedder)) as c:
        codes = [c.get("/v1/ingest/jobs", headers=bearer("k-a")).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        r = c.get("/v1/ingest/jobs", headers=bearer("k-a"))
        assert r.json()["error"]["code"] == "rate_limited" and 1 <= int(r.headers["Retry-After"]) <= 60
        assert c.get("/v1/ingest/jobs", headers=bearer("k-b")).status_code == 200
        assert c.get("/v1/ingest/jobs", headers=bearer("k-wrong")).status_code == 401  # not counted


def test_a_rate_limit_that_does_not_parse_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="rate limit"):
        Settings(data_dir=tmp_path, rate_limit="lots")


def test_neither_keys_nor_document_text_reach_the_logs(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    key, text = "k-7f3a9c-secret", "Confidential merger memo between Orion and Vega."
    settings = Settings(data_dir=tmp_path, api_keys=[f"acme:{key}"], log_level="DEBUG", access_log=True)  # type: ignore[list-item]
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(settings, embedder=embedder)) as c:
        assert (
            c.post(
                "/v1/documents", json={"documents": [{"id": "m1", "text": text}]}, headers=bearer(key)
            ).status_code
            == 200
        )
        assert c.post("/v1/search", json={"query": "merger memo"}, headers=bearer(key)).status_code == 200
        assert c.post("/v1/answer", json={"query": "merger memo"}, headers=bearer(key)).status_code == 200
        assert c.post("/v1/search", json={"query": "x"}, headers=bearer(key + "-wrong")).status_code == 401
        bad = c.post(
            "/v1/documents",
            json={"documents": [{"id": "m2", "text": text, "metadata": {"date": "soon"}}]},
            headers=bearer(key),
        )
        assert bad.status_code == 422
    logged = caplog.text
    assert caplog.records  # the requests were logged
    assert key not in logged and text not in logged and "Orion" not in logged


def test_hash_key_prints_the_entry_to_store() -> None:
    out = CliRunner().invoke(cli, ["hash-key", "--tenant", "acme"], input="k-1\n")
    assert out.exit_code == 0, out.output
    assert out.output.strip() == "acme:" + hash_key("k-1")
    assert parse_entry(out.output.strip()) == parse_entry("acme:k-1")
