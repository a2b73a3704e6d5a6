from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

import pytest

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.ingest.load import FieldMap, LoadFailure, LoadOptions, load_paths
from indexers.records import Document
from indexers.text.chunk import Chunker, rebuild


def test_beir_jsonl_gz_and_broken_lines(tmp_path: Path) -> None:
    lines = [
        json.dumps({"_id": "1", "title": "T", "text": "hello", "metadata": {"year": 2020}}),
        "{not json",
        json.dumps({"_id": "2", "text": ""}),
        json.dumps([1, 2]),
        json.dumps({"id": 3, "text": "third"}),
    ]
    with gzip.open(tmp_path / "corpus.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n\n")
    out = list(load_paths([tmp_path]))
    docs = [d for d in out if isinstance(d, Document)]
    failures = [d for d in out if isinstance(d, LoadFailure)]
    assert [(d.id, d.title, d.year) for d in docs] == [("1", "T", 2020), ("3", None, None)]
    assert [f.source.rsplit(":", 1)[1] for f in failures] == ["2", "3", "4"]
    assert "not JSON" in failures[0].reason and "empty" in failures[1].reason


def test_text_markdown_and_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# The Title\n\nBody text.\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("plain text", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("   \n", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\xfa broken")
    (tmp_path / "ignored.bin").write_bytes(b"\x00")
    out = {getattr(d, "id", None) or Path(d.source).name: d for d in load_paths([tmp_path])}  # type: ignore[union-attr]
    assert set(out) == {"a.md", "sub/b.txt", "empty.txt", "bad.txt"}
    a = out["a.md"]
    assert isinstance(a, Document) and a.title == "The Title" and a.text == "# The Title\n\nBody text.\n"
    assert isinstance(out["empty.txt"], LoadFailure) and isinstance(out["bad.txt"], LoadFailure)


def test_ids_default_to_a_content_hash(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(
        json.dumps({"text": "same"}) + "\n" + json.dumps({"text": "same"}) + "\n", encoding="utf-8"
    )
    a, b = list(load_paths([path]))
    assert isinstance(a, Document) and isinstance(b, Document) and a.id == b.id and len(a.id) == 32


def only(items: list[Document | LoadFailure]) -> Document:
    assert len(items) == 1 and isinstance(items[0], Document), items
    return items[0]


def test_markdown_front_matter_becomes_metadata(tmp_path: Path) -> None:
    (tmp_path / "note.md").write_text(
        "---\ntitle: Release notes\ndate: 2026-03-04\ntags: [release, api]\nid: notes-1\n---\n"
        "# Ignored heading\n\nWhat changed.\n",
        encoding="utf-8",
    )
    doc = only(list(load_paths([tmp_path])))
    assert (doc.id, doc.title, doc.date) == ("notes-1", "Release notes", dt.date(2026, 3, 4))
    assert doc.metadata["tags"] == ["release", "api"] and doc.text.startswith("---\ntitle: Release notes")
    (tmp_path / "note.md").write_text("---\n: [broken\n---\nbody\n", encoding="utf-8")
    failure = next(iter(load_paths([tmp_path])))
    assert isinstance(failure, LoadFailure) and "front matter" in failure.reason


def test_html_main_text_without_boilerplate(tmp_path: Path) -> None:
    (tmp_path / "page.html").write_text(
        '<html lang="en-GB"><head><title>Data retention</title>'
        '<meta property="article:published_time" content="2025-06-01T10:00:00Z">'
        "<script>var tracking = 1;</script><style>p {color: red}</style></head>"
        "<body><nav>Home | About</nav><main><h1>Data retention</h1><p>Keep logs for 30 days.</p>"
        "<p>Delete backups after a year.</p></main><footer>© 2025</footer></body></html>",
        encoding="utf-8",
    )
    doc = only(list(load_paths([tmp_path])))
    assert doc.title == "Data retention" and doc.date == dt.date(2025, 6, 1) and doc.metadata["lang"] == "en"
    assert "Keep logs for 30 days." in doc.text and "Delete backups" in doc.text
    assert "tracking" not in doc.text and "Home" not in doc.text and "©" not in doc.text


def write_pdf(path: Path, pages: list[str], title: str | None = None) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_creation_date(dt.datetime(2024, 1, 31, tzinfo=dt.UTC))
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))


def test_pdf_pages_are_kept_and_chunks_know_their_page(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    pages = [" ".join(f"Page {p} sentence {i} about contracts." for i in range(12)) for p in (1, 2, 3)]
    write_pdf(tmp_path / "contract.pdf", pages, title="Service contract")
    doc = only(list(load_paths([tmp_path])))
    assert doc.title == "Service contract" and doc.date == dt.date(2024, 1, 31)
    assert len(doc.page_starts) == 3 and doc.metadata["pages"] == 3
    for n, start in enumerate(doc.page_starts, 1):
        assert doc.text[start:].startswith(f"Page {n} sentence 0")
    chunks = Chunker(embedder.count_tokens, max_tokens=40, overlap_tokens=0).chunk(doc)
    assert len(chunks) >= 6
    for chunk in chunks:
        assert chunk.text.startswith(f"Page {chunk.metadata['page']} sentence")
    # two short pages fit in one chunk's tokens, and still make two chunks: each on its own page
    write_pdf(tmp_path / "short.pdf", ["The lease runs for ten years.", "Rent is indexed yearly."])
    short = next(d for d in load_paths([tmp_path / "short.pdf"]) if isinstance(d, Document))
    cut = Chunker(embedder.count_tokens, max_tokens=200, overlap_tokens=32).chunk(short)
    assert [(c.metadata["page"], c.text.strip()) for c in cut] == [
        (1, "The lease runs for ten years."),
        (2, "Rent is indexed yearly."),
    ]
    assert rebuild([(c.text, c.metadata["char_start"]) for c in cut]) == short.text


def test_jsonl_field_mapping_and_top_level_metadata(tmp_path: Path) -> None:
    line = {
        "uid": "a1",
        "body": "Text.",
        "heading": "Head",
        "date": "2020-05-06",
        "article": 7,
        "nested": {"x": 1},
    }
    (tmp_path / "x.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    options = LoadOptions(fields=FieldMap(id="uid", text="body", title="heading"))
    doc = only(list(load_paths([tmp_path], options=options)))
    assert (doc.id, doc.title, doc.text, doc.date) == ("a1", "Head", "Text.", dt.date(2020, 5, 6))
    assert doc.metadata["article"] == 7 and "nested" not in doc.metadata


def test_folder_globs_and_hidden_files(tmp_path: Path) -> None:
    for rel in ("a/keep.md", "a/skip.txt", "b/keep.md", "b/drafts/skip.md", ".git/x.md", "a/.hidden.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("text", encoding="utf-8")
    options = LoadOptions(include=["**/*.md", "*.md"], exclude=["**/drafts/*"])
    ids = sorted(d.id for d in load_paths([tmp_path], options=options) if isinstance(d, Document))
    assert ids == ["a/keep.md", "b/keep.md"]


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("corrupt.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage", "PDF"),
        ("latin1.txt", "caf\xe9".encode("latin-1"), "UTF-8"),
        ("empty.md", b"", "empty"),
    ],
)
def test_unreadable_files_give_reasons(tmp_path: Path, name: str, content: bytes, reason: str) -> None:
    (tmp_path / name).write_bytes(content)
    failure = next(iter(load_paths([tmp_path])))
    assert isinstance(failure, LoadFailure) and reason in failure.reason


def test_oversized_files_are_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    with big.open("wb") as f:
        f.truncate(3 * 1024 * 1024)  # sparse: costs no disk
    failure = next(iter(load_paths([tmp_path], options=LoadOptions(max_bytes=1024 * 1024))))
    assert isinstance(failure, LoadFailure) and "3.0 MB, over the 1.0 MB limit" in failure.reason
