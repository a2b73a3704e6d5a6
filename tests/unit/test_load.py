from __future__ import annotations

import gzip
import json
from pathlib import Path

from indexers.documents import Document
from indexers.load import LoadFailure, load_paths


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
    assert set(out) == {"a", "b", "empty.txt", "bad.txt"}
    a = out["a"]
    assert isinstance(a, Document) and a.title == "The Title" and a.text == "Body text.\n"
    assert isinstance(out["empty.txt"], LoadFailure) and isinstance(out["bad.txt"], LoadFailure)


def test_ids_default_to_a_content_hash(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(
        json.dumps({"text": "same"}) + "\n" + json.dumps({"text": "same"}) + "\n", encoding="utf-8"
    )
    a, b = list(load_paths([path]))
    assert isinstance(a, Document) and isinstance(b, Document) and a.id == b.id and len(a.id) == 32
