"""A clause question is answered with the clause's body, not its heading, whatever format the
policy came in: Markdown, plain text, HTML, PDF and JSON records, through the loaders and the API.
(A plain-text file is named by its file name: its first line is not its title yet.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.ingest.load import load_paths
from indexers.records import Document
from tests.conftest import doc_json, loaded_app
from tests.unit.test_load import write_pdf

SECTIONS = [
    ("Scope", "This policy covers every courier of Kestrel Parcels."),
    ("Uniforms", "Couriers receive two jackets and four shirts each year. Lost items are replaced once."),
    ("Vehicles", "Vans are serviced every 20,000 kilometres. Tyres are checked weekly by the depot."),
]


def _markdown(name: str) -> str:
    body = "\n\n".join(f"## Section {i}. {t}\n{x}" for i, (t, x) in enumerate(SECTIONS, 1))
    return f"# Kestrel Parcels {name}\n\n{body}\n"


def _files(root: Path) -> None:
    (root / "kestrel-markdown.md").write_text(_markdown("Markdown Policy"), encoding="utf-8")
    plain = "\n\n".join(f"Section {i}. {t}\n{x}" for i, (t, x) in enumerate(SECTIONS, 1))
    (root / "kestrel-plain-policy.txt").write_text(
        f"Kestrel Parcels Plain Policy\n\n{plain}\n", encoding="utf-8"
    )
    html = "".join(f"<h2>Section {i}. {t}</h2><p>{x}</p>" for i, (t, x) in enumerate(SECTIONS, 1))
    (root / "kestrel-html.html").write_text(
        f"<html><head><title>Kestrel Parcels Html Policy</title></head><body><h1>Kestrel Parcels Html"
        f" Policy</h1>{html}</body></html>",
        encoding="utf-8",
    )
    write_pdf(
        root / "kestrel-pdf.pdf",
        ["\n\n".join(f"Section {i}. {t}\n{x}" for i, (t, x) in enumerate(SECTIONS, 1))],
        title="Kestrel Parcels Pdf Policy",
    )
    records = [
        {"_id": f"uniform-json-{i}", "title": f"Kestrel Parcels Json Policy Section {i}. {t}", "text": x}
        for i, (t, x) in enumerate(SECTIONS, 1)
    ]
    (root / "kestrel-json.jsonl").write_text(
        "\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8"
    )


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder
) -> Iterator[TestClient]:
    root = tmp_path_factory.mktemp("formats")
    _files(root)
    docs = [doc_json(d) for d in load_paths([root]) if isinstance(d, Document)]
    assert len(docs) == 7
    with loaded_app(tmp_path_factory.mktemp("formats-data"), embedder, docs) as c:
        yield c


@pytest.mark.parametrize("fmt", ["Markdown", "Plain", "Html", "Pdf", "Json"])
def test_a_section_is_answered_with_its_body_in_every_format(client: TestClient, fmt: str) -> None:
    r = client.post("/v1/answer", json={"query": f"What does Section 2 of the {fmt} policy say?"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["abstained"] is False, body["route"]["reason"]
    assert body["answer"].startswith("Couriers receive two jackets"), body["answer"]
    assert "Uniforms [" not in body["answer"]


@pytest.mark.parametrize("fmt", ["Markdown", "Html", "Pdf"])
def test_a_section_missing_from_the_named_format_is_declined(client: TestClient, fmt: str) -> None:
    body = client.post("/v1/answer", json={"query": f"What does Section 9 of the {fmt} policy say?"}).json()
    assert body["abstained"] is True and body["answer"].endswith("has no Section 9."), body["answer"]
