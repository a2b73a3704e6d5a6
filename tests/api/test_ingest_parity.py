"""`rag-router ingest` of one folder reports the same in process and against a server: the same
counts, the same failures (``file:line``), on stdout, and a non-zero exit when anything failed;
an id read twice is the same failure whether or not its copies went up in one batch."""

from __future__ import annotations

import gzip
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
    # repeats of ids read in other files: a file's front matter, records of a compressed JSONL
    (folder / "c.md").write_text("---\nid: b/readme.txt\n---\nThe berth rules, again.\n", encoding="utf-8")
    more = [
        json.dumps({"id": "a/readme.txt", "text": "A record named like a file."}),
        json.dumps({"id": "r3", "text": "Pilots board at the outer buoy."}),
        json.dumps({"id": "r1", "text": "r1 once more."}),
    ]
    with gzip.open(folder / "z-more.jsonl.gz", "wt", encoding="utf-8") as out:
        out.write("\r\n".join(more))
    return folder


def report(stdout: str) -> tuple[dict[str, str], list[str]]:
    rows = {
        label: m.group(1) for label in ROWS if (m := re.search(rf"│ {re.escape(label)}\s*│ (\S+)", stdout))
    }
    return rows, sorted(line for line in stdout.splitlines() if line.startswith("failed "))


@pytest.mark.parametrize("batch_bytes", [1 << 20, 1], ids=["one batch", "a batch a file"])
def test_in_process_and_server_ingest_report_the_same(
    batch_bytes: int,
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
    with TestClient(server) as http:
        client = Client(http)  # type: ignore[arg-type]
        with pytest.raises(typer.Exit) as ended:
            ingest_there(client, iter_files([folder], LoadOptions()), "auto", False, batch_bytes)
        stored = {d: client.document(d)["text"] for d in ("a/readme.txt", "b/readme.txt", "r1", "r3")}
    assert ended.value.exit_code == EXIT_FAILURES
    there_rows, there_failures = report(capsys.readouterr().out)

    assert here_rows == there_rows and here_rows["failed"] == "5" and here_rows["documents"] == "9"
    assert here_failures == there_failures
    assert [f.split(": ")[0] for f in here_failures] == [
        f"failed {folder}/c.md",
        f"failed {folder}/records.jsonl:2",
        f"failed {folder}/records.jsonl:3",
        f"failed {folder}/z-more.jsonl.gz:1",
        f"failed {folder}/z-more.jsonl.gz:3",
    ]
    assert stored == {  # the first copy of each id, and the records that were read once
        "a/readme.txt": "Harbour fees are due monthly.",
        "b/readme.txt": "Berths are booked a week ahead.",
        "r1": "Cargo insurance covers the crossing.",
        "r3": "Pilots board at the outer buoy.",
    }


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
