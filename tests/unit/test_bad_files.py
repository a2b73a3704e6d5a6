"""Bad files are told apart from text and reported one line each: binary content whatever the
name, another encoding, and a plain-text file's first short line as its title."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexers.ingest.formats import Unreadable, read_text
from indexers.ingest.load import LoadFailure, load_paths
from indexers.records import Document

ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x00" * 64, "binary content"),
        (ELF, "binary content"),
        (bytes([1, 2, 3, 4, 5, 6, 7, 8]) * 50 + b"some words", "binary content"),
        ("Hello".encode("utf-16"), "UTF-16 text; convert the file to UTF-8"),
        (b"caf\xe9 au lait, a Latin-1 file", "not valid UTF-8 (byte 3)"),
    ],
)
def test_what_is_not_utf8_text_is_refused_with_its_reason(data: bytes, reason: str) -> None:
    with pytest.raises(Unreadable, match=reason.replace("(", r"\(").replace(")", r"\)")):
        read_text(data)


def test_text_with_tabs_and_form_feeds_is_text() -> None:
    assert read_text(b"Name\tValue\n\x0cPage two\r\n").text == "Name\tValue\n\x0cPage two\r\n"


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Office facilities notes\n\nThe kitchen is on the second floor.\n", "Office facilities notes"),
        ("  办公室使用须知\n会议室须提前预订。\n", "办公室使用须知"),
        ("Keep access logs for thirty days.\nThen delete them.\n", None),  # a sentence, not a title
        ("Only one line here\n", None),  # nothing follows it
        ("x" * 120 + "\nmore\n", None),  # too long for a title
    ],
)
def test_a_plain_text_files_first_short_line_is_its_title(text: str, title: str | None) -> None:
    parsed = read_text(text.encode())
    assert parsed.title == title and parsed.text == text  # the text stays as written


def test_every_bad_file_of_a_folder_is_its_own_failure(tmp_path: Path) -> None:
    (tmp_path / "zeros.txt").write_bytes(b"\x00" * 128)
    (tmp_path / "program.md").write_bytes(ELF)
    (tmp_path / "good.txt").write_text("Notes\n\nThe lift is serviced on Mondays.\n", encoding="utf-8")
    read = list(load_paths([tmp_path]))
    failures = sorted((Path(f.source).name, f.reason) for f in read if isinstance(f, LoadFailure))
    assert [name for name, _ in failures] == ["program.md", "zeros.txt"]
    assert all("binary content" in error for _, error in failures)
    (doc,) = [d for d in read if isinstance(d, Document)]
    assert doc.title == "Notes"
