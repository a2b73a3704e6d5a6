"""Document ids from what was named: equal file names in different folders stay apart, and an id
read twice in one ingest is a reported failure, never a silent replacement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from indexers.ingest import load
from indexers.ingest.load import LoadFailure, LoadOptions, SeenIds, iter_files, load_paths
from indexers.records import Document
from rag_router.cli.repeats import Repeats
from rag_router.cli.report import Summary
from rag_router.cli.upload import batches


def two_readmes(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "coll" / "a" / "readme.txt", tmp_path / "coll" / "b" / "readme.txt"
    for path, text in ((a, "The first readme."), (b, "The second readme.")):
        path.parent.mkdir(parents=True)
        path.write_text(text, encoding="utf-8")
    return a, b


def ids(items: list[Document | LoadFailure]) -> list[str]:
    assert all(isinstance(i, Document) for i in items), items
    return [i.id for i in items if isinstance(i, Document)]


def test_two_files_of_one_name_in_different_folders_keep_both(tmp_path: Path) -> None:
    a, b = two_readmes(tmp_path)
    assert ids(list(load_paths([a, b]))) == ["a/readme.txt", "b/readme.txt"]
    # as uploaded to a server: the same names
    names = [name for batch in batches(iter_files([a, b]), 1 << 20) for name, _ in batch]
    assert names == ["a/readme.txt", "b/readme.txt"]


def test_several_folders_are_named_from_their_common_parent(tmp_path: Path) -> None:
    two_readmes(tmp_path)
    coll = tmp_path / "coll"
    assert ids(list(load_paths([coll / "a", coll / "b"]))) == ["a/readme.txt", "b/readme.txt"]


def test_one_folder_or_one_file_keeps_the_ids_it_always_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = two_readmes(tmp_path)
    assert ids(list(load_paths([tmp_path / "coll"]))) == ["a/readme.txt", "b/readme.txt"]
    assert ids(list(load_paths([a]))) == ["readme.txt"]
    monkeypatch.chdir(tmp_path / "coll")  # relative paths, with a detour through ".."
    assert ids(list(load_paths([Path("a/../b"), Path("a")]))) == ["b/readme.txt", "a/readme.txt"]


def test_an_id_read_twice_fails_its_second_copy_with_where_it_was(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    records = [{"id": "r1", "text": "First."}, {"id": "r2", "text": "Other."}, {"id": "r1", "text": "Again."}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    first, other, again = load_paths([corpus])
    assert isinstance(first, Document) and first.text == "First." and isinstance(other, Document)
    assert isinstance(again, LoadFailure) and again.source == f"{corpus}:3" and "'r1'" in again.reason


def test_a_file_and_a_record_of_the_same_id_collide_too(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("A note.", encoding="utf-8")
    (tmp_path / "z.jsonl").write_text(json.dumps({"id": "notes.txt", "text": "A record."}) + "\n")
    note, record = load_paths([tmp_path])
    assert isinstance(note, Document) and isinstance(record, LoadFailure)


def test_seen_ids_remember_past_their_first_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load.SeenIds, "_FLUSH", 4)
    seen = SeenIds()
    assert all(seen.add("t", f"d{i}") for i in range(10))
    assert not any(seen.add("t", f"d{i}") for i in range(10))
    assert seen.add("other", "d1")  # ids are per tenant


def test_a_run_against_a_server_leaves_out_what_an_earlier_batch_sent(tmp_path: Path) -> None:
    """Uploads of one CLI run: a file of only repeats is not sent; a file with some is sent as a
    copy whose repeated lines are blank, every other byte where it was (bytes the loader cannot
    read too, so that the server reports them at the same line)."""
    folder = tmp_path / "in"
    folder.mkdir()
    records = [json.dumps({"id": "r1", "text": "First."}), json.dumps({"id": "r2", "text": "Other."})]
    (folder / "a.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    (folder / "b.jsonl").write_text("\n".join(records) + "\n", encoding="utf-8")
    repeat = '{"id": "r2", "text": "é"}\r\n'.encode()
    long = json.dumps({"id": "r4", "text": "z" * 9000}).encode()  # past what is decoded at once
    rest = b'{"id": "r3", "text": "y"}\r\n' + long + b"\n\xff\n"
    (folder / "c.jsonl").write_bytes(repeat + rest)
    summary = Summary()
    sent = list(Repeats(LoadOptions(), summary, tmp_path).uploads(iter_files([folder])))
    assert [(u.name, u.local.name) for u in sent] == [("a.jsonl", "a.jsonl"), ("c.jsonl", "c.jsonl")]
    assert sent[0].path == folder / "a.jsonl" and sent[1].path.parent == tmp_path
    assert sent[1].path.read_bytes() == b" " * (len(repeat) - 2) + b"\r\n" + rest
    assert [where for where, _ in summary.failures] == [
        f"{folder}/b.jsonl:1",
        f"{folder}/b.jsonl:2",
        f"{folder}/c.jsonl:1",
    ]
    assert summary.failed == summary.documents == 3


@pytest.mark.parametrize(
    ("doc_id", "reason"),
    [("..", "path segment"), ("a/./b", "path segment"), ("tab\there", "control"), ("nul\x00x", "control")],
)
def test_a_record_id_the_api_refuses_fails_with_its_line(tmp_path: Path, doc_id: str, reason: str) -> None:
    """The API refuses these ids (a URL resolves "." away; a NUL cannot be typed, a tab breaks
    `documents list`): read from a file they were stored unreachable, so they fail as a line."""
    corpus = tmp_path / "odd.jsonl"
    rows = [{"id": "fine/一 🚀 x?y#z", "text": "kept"}, {"id": doc_id, "text": "refused"}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    items = list(load_paths([corpus]))
    assert isinstance(items[0], Document) and items[0].id == "fine/一 🚀 x?y#z"
    assert isinstance(items[1], LoadFailure) and items[1].source.endswith("odd.jsonl:2")
    assert reason in items[1].reason


def test_a_file_whose_name_is_no_id_fails_and_an_overlong_front_matter_id_too(tmp_path: Path) -> None:
    odd = tmp_path / "line\nbreak.txt"
    odd.write_text("text", encoding="utf-8")
    long = tmp_path / "long.md"
    long.write_text(f"---\nid: {'x' * 513}\n---\nbody\n", encoding="utf-8")
    failures = [i for i in load_paths([tmp_path]) if isinstance(i, LoadFailure)]
    assert sorted(f.reason.split(" (")[0].split(":")[0] for f in failures) == [
        "id is 513 characters, over the 512 allowed",
        "id must not contain control characters",
    ]
