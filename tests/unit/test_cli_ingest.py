"""`rag-router ingest` against a server: batching of uploads, Ctrl-C cancels, --detach leaves jobs running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from rag_router.cli import ingest as cli_ingest
from rag_router.cli import upload as cli_upload
from rag_router.cli.report import Summary
from rag_router.client import ApiError, document_path


class FakeServer:
    """The Client calls `ingest_there` makes, recorded; events end in a Ctrl-C when asked."""

    def __init__(self, *, interrupt: bool = False, status: str = "done", refuse_upload: int = 0) -> None:
        self.uploads: list[list[str]] = []
        self.cancelled: list[str] = []
        self.followed: list[str] = []
        self.interrupt = interrupt
        self.status = status
        self.refuse_upload = refuse_upload  # the nth upload fails with a 413

    def upload(self, files: list[tuple[str, Path]], *, tier: str) -> dict[str, Any]:
        if len(self.uploads) + 1 == self.refuse_upload:
            raise ApiError(413, "payload_too_large", "request body over 268435456 bytes")
        self.uploads.append([name for name, _ in files])
        results = [{"name": name, "documents": 1, "error": None} for name, _ in files]
        return {"job_id": f"job{len(self.uploads)}", "files": results}

    def job(self, job_id: str) -> dict[str, Any]:
        return {"total": 2}

    def events(self, job_id: str) -> Iterator[tuple[str, dict[str, Any]]]:
        self.followed.append(job_id)
        if self.interrupt:
            raise KeyboardInterrupt
        done = {"done": 2, "failed": 0, "created": 2, "updated": 0, "unchanged": 0, "chunks": 4}
        yield "done", {**done, "seconds": 1.0, "errors": [], "chunks_per_s": 4.0, "status": self.status}

    def cancel(self, job_id: str) -> dict[str, Any]:
        self.cancelled.append(job_id)
        return {"status": "cancelled"}


def files(tmp_path: Path, sizes: list[int]) -> list[tuple[Path, Path]]:
    out = []
    for i, size in enumerate(sizes):
        path = tmp_path / "in" / f"f{i}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x" * size)
        out.append((path, tmp_path / "in"))
    return out


def test_uploads_are_cut_by_bytes_and_a_large_file_goes_alone(tmp_path: Path) -> None:
    batches = list(cli_upload.batches(files(tmp_path, [40, 40, 30, 500, 10]), max_bytes=100))
    assert [[name for name, _ in b] for b in batches] == [
        ["f0.txt", "f1.txt"],
        ["f2.txt"],
        ["f3.txt"],
        ["f4.txt"],
    ]


def test_ctrl_c_while_following_cancels_every_job(tmp_path: Path) -> None:
    server = FakeServer(interrupt=True)
    with pytest.raises(typer.Exit) as stopped:
        cli_upload.ingest_there(server, files(tmp_path, [60, 60]), "auto", False, 100)  # type: ignore[arg-type]
    assert stopped.value.exit_code == 130
    assert server.cancelled == ["job1", "job2"]


def test_detach_uploads_and_leaves_the_jobs_running(tmp_path: Path) -> None:
    server = FakeServer()
    cli_upload.ingest_there(server, files(tmp_path, [60, 60]), "auto", True, 100)  # type: ignore[arg-type]
    assert server.uploads == [["f0.txt"], ["f1.txt"]] and server.followed == [] and server.cancelled == []


def test_followed_jobs_add_up_to_what_the_upload_already_counted() -> None:
    server = FakeServer()
    summary = Summary(documents=1, failed=1, failures=[("bad.png", "unsupported")])
    cli_upload.follow(server, ["job1", "job2"], summary)  # type: ignore[arg-type]
    assert (summary.documents, summary.failed, summary.created, summary.chunks_written) == (5, 1, 4, 8)
    assert summary.failures == [("bad.png", "unsupported")]


def test_a_job_that_did_not_end_done_makes_the_command_fail(tmp_path: Path) -> None:
    server = FakeServer(status="failed")
    with pytest.raises(typer.Exit) as stopped:
        cli_upload.ingest_there(server, files(tmp_path, [60]), "auto", False, 100)  # type: ignore[arg-type]
    assert stopped.value.exit_code == 1


def test_an_upload_refused_midway_cancels_the_jobs_already_sent(tmp_path: Path) -> None:
    server = FakeServer(refuse_upload=2)
    with pytest.raises(typer.Exit) as stopped:
        cli_upload.ingest_there(server, files(tmp_path, [60, 60, 60]), "auto", False, 100)  # type: ignore[arg-type]
    assert stopped.value.exit_code == 2 and server.cancelled == ["job1"]


def test_document_ids_are_escaped_in_urls_and_dot_segments_refused() -> None:
    assert document_path("notes/Q&A #3.md") == "/v1/documents/notes/Q%26A%20%233.md"
    assert document_path("what?.md") == "/v1/documents/what%3F.md"
    assert document_path("数据/第1条") == "/v1/documents/%E6%95%B0%E6%8D%AE/%E7%AC%AC1%E6%9D%A1"
    with pytest.raises(ApiError):
        document_path("a/../b.md")


def test_ray_work_sizes_reach_the_engine_and_are_refused_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from rag_router.cli import app

    seen: list[Any] = []

    async def ingest_ray(*args: Any) -> None:
        seen.append(args[-1])

    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(cli_ingest, "_ingest_ray", ingest_ray)
    monkeypatch.setattr(cli_ingest, "_ray_here", lambda found: None)
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\nText.\n")
    runner = CliRunner()
    ok = runner.invoke(app, ["ingest", str(doc), "--engine", "ray", "--unit-mb", "8", "--embed-units", "2"])
    assert ok.exit_code == 0, ok.output
    assert (seen[0].unit_mb, seen[0].embed_units) == (8.0, 2)
    plain = runner.invoke(app, ["ingest", str(doc), "--engine", "ray"])
    assert plain.exit_code == 0, plain.output
    assert (seen[1].unit_mb, seen[1].embed_units) == (1.0, 4)  # RayOptions' defaults
    refused = runner.invoke(app, ["ingest", str(doc), "--unit-mb", "8"])
    assert refused.exit_code == 2 and "--engine ray" in refused.output


def test_jobs_list_says_when_there_are_none_and_has_a_header_and_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from rag_router.cli import app
    from rag_router.cli import store as cli_store

    listed: list[dict[str, Any]] = []
    monkeypatch.setattr(cli_store, "with_client", lambda url, run: listed)
    empty = CliRunner().invoke(app, ["jobs", "list"])
    assert empty.exit_code == 0 and empty.stdout == "no ingestion jobs\n"
    job = {"job_id": "0" * 32, "status": "cancelling", "done": 0, "total": 300, "failed": 0}
    listed.append({**job, "chunks_per_s": 0.0, "eta_s": None, "created_at": 0.0, "updated_at": 60.0})
    header, line = CliRunner().invoke(app, ["jobs", "list"]).stdout.splitlines()
    assert header.split() == ["JOB", "STATUS", "CREATED", "UPDATED", "PROGRESS"]
    assert line.startswith(f"{'0' * 32}  cancelling") and "0/300 done" in line
    assert line.count(":") == 4  # a created and an updated time, each hh:mm:ss
