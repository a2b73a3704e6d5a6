"""`rag-router datasets fetch`: checked before unpacked, against a server on loopback."""

from __future__ import annotations

import hashlib
import http.server
import threading
import zipfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_router.cli import app
from rag_router.evaluation.datasets import CATALOGUE, Collection, DatasetError, fetch


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{server.server_address[1]}", root
        server.shutdown()


def beir_zip(path: Path, members: dict[str, str]) -> str:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)
    return hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()


MINI = {
    "mini/corpus.jsonl": '{"_id": "d1", "title": "", "text": "hello"}\n',
    "mini/queries.jsonl": '{"_id": "q1", "text": "hello"}\n',
    "mini/qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\n",
}


def test_a_checked_archive_is_unpacked_in_beir_layout(served: tuple[str, Path], tmp_path: Path) -> None:
    url, root = served
    md5 = beir_zip(root / "mini.zip", MINI)
    got = fetch(Collection("mini", f"{url}/mini.zip", md5, ""), tmp_path / "out")
    assert got == tmp_path / "out" / "mini"
    assert (got / "corpus.jsonl").read_text() == MINI["mini/corpus.jsonl"] and (
        got / "qrels" / "test.tsv"
    ).exists()
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["mini"]  # no temporary left


def test_a_wrong_checksum_unpacks_nothing(served: tuple[str, Path], tmp_path: Path) -> None:
    url, root = served
    beir_zip(root / "mini.zip", MINI)
    with pytest.raises(DatasetError, match="MD5"):
        fetch(Collection("mini", f"{url}/mini.zip", "0" * 32, ""), tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_member_outside_the_folder_is_refused(served: tuple[str, Path], tmp_path: Path) -> None:
    url, root = served
    md5 = beir_zip(root / "evil.zip", {**MINI, "../../escaped.txt": "x"})
    with pytest.raises(DatasetError, match="outside"):
        fetch(Collection("evil", f"{url}/evil.zip", md5, ""), tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()


def test_the_cli_lists_the_catalogue_and_refuses_unknown_names(tmp_path: Path) -> None:
    runner = CliRunner()
    listing = runner.invoke(app, ["datasets", "list"])
    assert listing.exit_code == 0 and all(name in listing.output for name in CATALOGUE)
    assert CATALOGUE["scifact"].md5 == "5f7d1de60b170fc8027bb7898e2efca1"  # BEIR's published MD5
    unknown = runner.invoke(app, ["datasets", "fetch", "nope", "--dest", str(tmp_path)])
    assert unknown.exit_code == 2 and "unknown collection" in unknown.output
