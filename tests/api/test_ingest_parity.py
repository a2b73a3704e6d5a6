"""`rag-router ingest` of one folder reports the same in process and against a server: the same
counts, the same failures (``file:line``), on stdout, and a non-zero exit when anything failed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.ingest.load import LoadOptions, iter_files
from rag_router.api import create_app
from rag_router.cli import app
from rag_router.cli.report import EXIT_FAILURES
from rag_router.cli.upload import ingest_there
from rag_router.client import Client
from rag_router.settings import Settings

ROWS = ("documents", "created", "updated", "skipped (unchanged)", "failed", "chunks written")


def a_folder(root: Path) -> Path:
    folder = root / "coll"
    for sub, text in (("a", "Harbour fees are due monthly."), ("b", "Berths are booked a week ahead.")):
        (folder / sub).mkdir(parents=True)
        (folder / sub / "readme.txt").write_text(text, encoding="utf-8")
    lines = [
        json.dumps({"id": "r1", "text": "Cargo insurance covers the crossing."}),
        '{"id": "r2", "text": "a line cut short',
        json.dumps({"id": "r1", "text": "The same id again."}),
    ]
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def report(stdout: str) -> tuple[dict[str, str], list[str]]:
    rows = {
        label: m.group(1) for label in ROWS if (m := re.search(rf"│ {re.escape(label)}\s*│ (\S+)", stdout))
    }
    return rows, sorted(line for line in stdout.splitlines() if line.startswith("failed "))


def test_in_process_and_server_ingest_report_the_same(
    tmp_path: Path,
    embedder: SentenceTransformerEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = a_folder(tmp_path)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "here"))
    monkeypatch.delenv("RAG_URL", raising=False)
    here = CliRunner().invoke(app, ["ingest", str(folder)])
    assert here.exit_code == EXIT_FAILURES, here.output
    here_rows, here_failures = report(here.stdout)

    server = create_app(Settings(data_dir=tmp_path / "there"), embedder=embedder)
    with TestClient(server) as http, pytest.raises(typer.Exit) as ended:
        client = Client(http)  # type: ignore[arg-type]
        ingest_there(client, iter_files([folder], LoadOptions()), "auto", False, 1 << 20)
    assert ended.value.exit_code == EXIT_FAILURES
    there_rows, there_failures = report(capsys.readouterr().out)

    assert here_rows == there_rows and here_rows["failed"] == "2" and here_rows["documents"] == "5"
    assert here_failures == there_failures
    assert [f.split(": ")[0] for f in here_failures] == [
        f"failed {folder}/records.jsonl:2",
        f"failed {folder}/records.jsonl:3",
    ]


def test_detach_prints_only_the_job_ids_on_stdout(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a-rather-long-file-name-so-that-a-wrapped-line-would-show.txt").write_text("Text.")
    with TestClient(create_app(Settings(data_dir=tmp_path / "data"), embedder=embedder)) as http:
        client = Client(http)  # type: ignore[arg-type]
        ingest_there(client, iter_files([folder], LoadOptions()), "auto", True, 1 << 20)
        out = capsys.readouterr().out
        job_id = out.strip()
        assert out == f"{job_id}\n" and client.job(job_id)["total"] == 1
