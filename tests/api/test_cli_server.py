"""One owner of the data: while `serve` runs, the CLI goes through its HTTP API (a real server process)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from rag_router.cli import app
from tests.crash.test_sigkill import free_port, server
from tests.unit.test_load import write_pdf

runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_LOG_LEVEL", "WARNING")
    monkeypatch.delenv("RAG_URL", raising=False)
    return tmp_path


def a_folder(root: Path) -> Path:
    folder = root / "inbox"
    (folder / "policies").mkdir(parents=True)
    (folder / "policies" / "retention.md").write_text(
        "# Data retention\n\nKeep access logs for thirty days, then delete them.\n", encoding="utf-8"
    )
    (folder / "fees.html").write_text(
        "<html><head><title>Harbour fees</title></head><body><p>Berth fees are due monthly.</p></body>",
        encoding="utf-8",
    )
    (folder / "zoll.txt").write_text(
        "Zollgebühren werden beim Import fällig. 关税在进口时缴纳。", encoding="utf-8"
    )
    write_pdf(
        folder / "lease.pdf", ["The harbour lease runs for ten years. " * 6, "Rent is indexed yearly. " * 6]
    )
    (root / "old.jsonl").write_text(
        json.dumps(
            {"id": "old-1", "text": "An archived note on cargo insurance.", "metadata": {"year": 2001}}
        )
        + "\n",
        encoding="utf-8",
    )
    return folder


def run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    return " ".join(result.output.split())


@pytest.mark.slow
def test_every_store_command_goes_through_the_running_server(env: Path) -> None:
    folder = a_folder(env)
    port = free_port()
    with server(env / "data", port, RAG_TIERS__HOT_WINDOW_DAYS="3650") as proc:
        report = run("ingest", str(folder))
        assert re.search(r"documents │ 4 ", report) and re.search(r"created │ 4 ", report), report
        again = run("ingest", str(folder))  # through the server, the same report as in process
        assert re.search(r"skipped \(unchanged\) │ 4 ", again), again
        assert "Data retention" in run("documents", "get", "policies/retention.md")
        assert "关税在进口时缴纳" in run("documents", "get", "zoll.txt")
        spaced = "\n  leading and trailing  \n"
        httpx.post(
            f"http://127.0.0.1:{port}/v1/documents", json={"documents": [{"id": "ws", "text": spaced}]}
        )
        printed = runner.invoke(app, ["documents", "get", "ws"])
        assert printed.exit_code == 0 and printed.stdout == spaced  # byte for byte, nothing added
        explained = run("query", "how long are access logs kept", "--explain")
        assert "route:" in explained and "features:" in explained and "policies/retention.md" in explained
        bad = env / "bad"
        bad.mkdir()
        (bad / "zeros.txt").write_bytes(b"\x00" * 64)
        (bad / "program.md").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
        failed = runner.invoke(app, ["ingest", str(bad)])  # through the server: a line per file
        lines = [ln for ln in failed.stdout.splitlines() if ln.startswith("failed ")]
        assert failed.exit_code == 3 and len(lines) == 2, failed.output
        assert all("binary content" in ln for ln in lines) and any("zeros.txt" in ln for ln in lines)
        asked = run("ask", "How long are access logs kept?")  # the cited answer, through the server
        assert "thirty days" in asked and "[1] policies/retention.md — Data retention" in asked, asked
        declined = runner.invoke(app, ["ask", "What is the boiling point of mercury?"])
        assert declined.exit_code == 4 and "declined:" in " ".join(declined.stderr.split()), declined.output
        listed = run("jobs", "list")
        assert len(re.findall(r"\b[0-9a-f]{32} done ", listed)) >= 2, listed  # whole ids
        run("ingest", str(env / "old.jsonl"), "--tier", "hot")  # dated 2001, placed hot by hand
        dry = run("retier", "--dry-run")
        assert "1 documents past the hot window; would move 1" in dry  # old-1 (2001) is past 10 years
        assert "moved 1" in run("retier")
        moved = httpx.get(f"http://127.0.0.1:{port}/v1/documents/old-1").json()
        assert moved["tiers"] == ["cold"]
        detached = runner.invoke(app, ["ingest", str(folder / "fees.html"), "--detach"])
        assert detached.exit_code == 0, detached.output
        # stdout: the job id alone (JOB=$(rag-router ingest … --detach) captures it); the hint: stderr
        assert re.fullmatch(r"[0-9a-f]{32}\n", detached.stdout), detached.output
        job_id = detached.stdout.strip()
        assert f"rag-router jobs follow {job_id}" in " ".join(detached.stderr.split())
        assert re.search(r"(cancelling|cancelled|done)", run("jobs", "cancel", job_id))
        assert run("documents", "delete", "zoll.txt").startswith("deleted zoll.txt")
        # the in-process options mean the same through the server
        mapped = env / "mapped.jsonl"
        mapped.write_text(
            json.dumps({"key": "m-1", "body": "Pilotage is compulsory.", "heading": "Pilots"}) + "\n"
        )
        fields = ("--id-field", "key", "--text-field", "body", "--title-field", "heading")
        assert re.search(r"created │ 1 ", run("ingest", str(mapped), *fields))
        assert "Pilots" in run("documents", "get", "m-1")
        other = env / "other.jsonl"
        other.write_text(json.dumps({"id": "t-1", "text": "Only the other tenant sees this."}) + "\n")
        assert re.search(r"created │ 1 ", run("ingest", str(other), "--tenant", "t2"))
        assert httpx.get(f"http://127.0.0.1:{port}/v1/documents/t-1").status_code == 404  # not default's
        assert proc.poll() is None  # the server held the store the whole time
    # SIGKILL left serve.json behind: stale, ignored; the CLI opens the store itself again
    assert (env / "data" / "serve.json").exists()
    assert "policies/retention.md" in run("query", "access logs thirty days")


def test_an_owner_that_does_not_answer_is_one_clear_line(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rag_router.cli.common as common

    monkeypatch.setattr(common, "START_WAIT_S", 0.5)
    (env / "data").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        port = free_port()
        (env / "data" / "serve.json").write_text(
            json.dumps({"pid": holder.pid, "url": f"http://0.0.0.0:{port}"}), encoding="utf-8"
        )
        for args in (["query", "freedom"], ["retier"], ["jobs", "list"]):
            result = runner.invoke(app, args)
            assert result.exit_code == 2 and "Traceback" not in result.output, result.output
            line = " ".join(result.output.split())
            assert f"pid {holder.pid}" in line and f"does not answer at http://127.0.0.1:{port}" in line
    finally:
        holder.kill()
        holder.wait()


def test_a_url_that_answers_nothing_is_one_clear_line(env: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = runner.invoke(app, ["query", "x", "--url", url])
    assert result.exit_code == 2 and f"no rag-router answers at {url}" in " ".join(result.output.split())


@pytest.mark.slow
def test_sigterm_stops_the_server_and_removes_serve_json(env: Path) -> None:
    """What systemd, docker stop and kill send: the server shuts down and says it no longer holds
    the data dir (SIGINT always did; SIGTERM left serve.json behind)."""
    port = free_port()
    with server(env / "data", port, RAG_LOG_LEVEL="INFO") as proc:
        assert (env / "data" / "serve.json").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert not (env / "data" / "serve.json").exists()
    log = (env / "server.log").read_text()
    assert "rag-router ready at http://127.0.0.1:" in log  # once the port was bound
    assert "predates index.json" not in log  # a new data dir is no older index


def in_a_documents_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> Path:
    """A user's folder of documents outside any store, the working folder, with no data dir chosen."""
    docs = tmp_path / "mydocs"
    docs.mkdir()
    (docs / name).write_text(text, encoding="utf-8")
    monkeypatch.delenv("RAG_DATA_DIR", raising=False)
    monkeypatch.delenv("RAG_URL", raising=False)
    monkeypatch.chdir(docs)
    return docs


@pytest.mark.slow
def test_a_command_from_any_folder_finds_the_running_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cd ~/mydocs && rag-router ingest .` while `serve` runs elsewhere: the documents reach that
    server (it says so on stderr), and no second store appears among the documents."""
    docs = in_a_documents_folder(
        tmp_path, monkeypatch, "leave.md", "# Leave\n\nStaff get 28 days of paid leave a year.\n"
    )
    port = free_port()
    with server(tmp_path / "data", port):
        result = runner.invoke(app, ["ingest", "."])
        assert result.exit_code == 0, result.output
        assert f"using the running server at http://127.0.0.1:{port}" in " ".join(result.stderr.split())
        assert httpx.get(f"http://127.0.0.1:{port}/v1/documents/leave.md").status_code == 200
        asked = runner.invoke(app, ["ask", "How many days of paid leave do staff get?"])
        assert asked.exit_code == 0 and "28 days" in asked.stdout, asked.output
    assert not (docs / ".rag-data").exists()


@pytest.mark.slow
def test_an_ingest_for_this_store_keeps_to_it_while_another_store_is_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make run` in a second checkout while the first one serves: its sample goes into the
    checkout's own store (where its `serve` will look), not into the other server's."""
    in_a_documents_folder(tmp_path, monkeypatch, "leave.md", "# Leave\n\nStaff get 28 days of paid leave.\n")
    checkout = tmp_path / "second-checkout"
    checkout.mkdir()
    monkeypatch.chdir(checkout)
    port = free_port()
    with server(tmp_path / "data", port):
        result = runner.invoke(app, ["ingest", str(tmp_path / "mydocs"), "--this-store"])
        assert result.exit_code == 0, result.output
        said = " ".join(result.stderr.split())
        assert "using the running server" not in said
        assert f"creating a new store at {(checkout / '.rag-data').resolve()}" in said
        assert httpx.get(f"http://127.0.0.1:{port}/v1/documents/leave.md").status_code == 404
    listed = runner.invoke(app, ["documents", "list", "--json"])
    assert listed.exit_code == 0 and "leave.md" in listed.stdout, listed.output


def test_no_store_is_created_unasked_inside_the_folder_being_ingested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = in_a_documents_folder(tmp_path, monkeypatch, "note.txt", "Parking permits cost 35 EUR a month.\n")
    refused = runner.invoke(app, ["ingest", "."])
    assert refused.exit_code == 2 and "--new-store" in refused.stderr and "RAG_DATA_DIR" in refused.stderr
    assert not (docs / ".rag-data").exists()
    created = runner.invoke(app, ["ingest", ".", "--new-store"])
    assert created.exit_code == 0, created.output
    said = " ".join(created.stderr.split())
    assert f"creating a new store at {(docs / '.rag-data').resolve()}" in said
    again = runner.invoke(app, ["ingest", "."])  # the store exists now: it is this folder's
    assert again.exit_code == 0 and "writing to the store at" in " ".join(again.stderr.split())
