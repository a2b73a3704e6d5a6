"""What the CLI prints and leaves behind: stdout for scripts, one line per error, no noise, no litter."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import uvicorn
from typer.testing import CliRunner

from indexers.ingest.formats import read_pdf
from indexers.manifest import IndexManifest, check_manifest
from rag_router.cli import app
from rag_router.cli.store import _server, snippet
from rag_router.evaluation.datasets import CATALOGUE
from rag_router.owner import OWNER_FILE

runner = CliRunner()


def test_a_snippet_ends_between_words() -> None:
    text = "The harbour lease runs for ten years and the rent is indexed yearly by the council. " * 6
    cut = snippet(text, 100)
    assert cut.endswith("…") and len(cut) <= 101
    assert text.startswith(cut[:-1]) and text[len(cut) - 1] == " "  # the next character is a space
    assert snippet("short text", 100) == "short text"


def test_a_snippet_of_chinese_ends_at_the_limit() -> None:
    text = "第一条 为了规范员工行为，维护公司秩序，根据国家有关法律法规制定本手册。" * 10
    cut = snippet(text, 50)
    assert cut == text[:50] + "…"  # no spaces to go back to: any two characters are a boundary


def test_datasets_list_is_one_whole_line_each_at_any_width() -> None:
    result = runner.invoke(app, ["datasets", "list"], terminal_width=40)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == len(CATALOGUE)
    for line, c in zip(lines, CATALOGUE.values(), strict=True):
        assert line.split()[:3] == [c.name, c.md5, c.url]


def test_reading_where_there_is_no_index_says_so_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAG_DATA_DIR", raising=False)
    monkeypatch.delenv("RAG_URL", raising=False)
    for args in (["query", "freedom"], ["documents", "get", "a"], ["retier", "--dry-run"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        line = " ".join(result.output.split())
        assert f"there is no index at {tmp_path / '.rag-data'}" in line and "rag-router ingest PATH" in line
    assert not (tmp_path / ".rag-data").exists()


def test_sigterm_removes_serve_json(tmp_path: Path) -> None:
    """uvicorn shuts down on SIGTERM, puts back the handler it found and raises the signal again."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from rag_router.owner import holding

        with holding(Path({str(tmp_path)!r}), "http://127.0.0.1:1"):
            caught = []
            found = signal.signal(signal.SIGTERM, lambda s, f: caught.append(s))  # uvicorn's
            os.kill(os.getpid(), signal.SIGTERM)
            signal.signal(signal.SIGTERM, found)
            for s in caught:
                signal.raise_signal(s)
            print("not reached")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 143 and "not reached" not in done.stdout, done.stderr
    assert not (tmp_path / OWNER_FILE).exists()


def test_a_new_data_dir_is_not_an_old_index(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    minilm = IndexManifest("all-MiniLM-L6-v2", 384)
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / OWNER_FILE).write_text(json.dumps({"pid": 1, "url": "http://x"}))
    (tmp_path / "new" / "embed-cache.sqlite").write_bytes(b"")
    check_manifest(tmp_path / "new", minilm)
    assert "predates" not in caplog.text
    (tmp_path / "old" / "hot").mkdir(parents=True)  # tiers written before index.json existed
    check_manifest(tmp_path / "old", minilm)
    assert "predates" in caplog.text


def test_a_repaired_pdf_logs_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, "Rent is indexed yearly.")
    data = bytes(pdf.output())
    broken = re.sub(rb"startxref\s+(\d+)", lambda m: b"startxref\n" + str(int(m[1]) + 7).encode(), data)
    with caplog.at_level(logging.WARNING):
        assert "Rent is indexed yearly." in read_pdf(broken).text
    assert not [r for r in caplog.records if r.name.startswith("pypdf")]


async def _hello(scope: dict[str, object], receive: object, send: object) -> None:
    if scope["type"] == "lifespan":
        return  # no lifespan: uvicorn goes on (lifespan="auto")
    raise AssertionError("no request expected")


def test_ready_is_logged_once_the_port_is_bound(caplog: pytest.LogCaptureFixture) -> None:
    with contextlib.closing(socket.socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = uvicorn.Config(_hello, host="127.0.0.1", port=port, lifespan="off", log_config=None)
        with caplog.at_level(logging.INFO), pytest.raises(SystemExit):
            asyncio.run(_server(config, "rag-router ready").serve())  # uvicorn exits: in use
        assert "rag-router ready" not in caplog.text  # the port is in use: never ready
    config = uvicorn.Config(_hello, host="127.0.0.1", port=port, lifespan="off", log_config=None)
    server = _server(config, "rag-router ready")
    server.should_exit = True  # bind, start, stop at once
    with caplog.at_level(logging.INFO):
        asyncio.run(server.serve())
    assert server.started and "rag-router ready" in caplog.text
