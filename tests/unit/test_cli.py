"""The console script end to end: ingest → query → eval, with the real engines and model."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_router.cli import app
from tests.conftest import SAMPLE

runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_LOG_LEVEL", "WARNING")
    return tmp_path


def test_ingest_twice_then_query(env: Path) -> None:
    first = runner.invoke(app, ["ingest", str(SAMPLE)])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["ingest", str(SAMPLE)])
    assert second.exit_code == 0
    assert re.search(r"skipped \(unchanged\)\s+│ 33 ", second.output)
    assert re.search(r"chunks embedded\s+│ 0 ", second.output)
    result = runner.invoke(app, ["query", "freedom of peaceful assembly", "--json", "--top-k", "1"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout[result.stdout.index("{") :])
    assert body["hits"][0]["doc_id"] == "udhr-art-20"


def test_eval_json_on_a_beir_folder(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = env / "ds"
    (ds / "qrels").mkdir(parents=True)
    shutil.copy(SAMPLE / "udhr.jsonl", ds / "corpus.jsonl")
    queries = {"q1": ("Is slavery allowed?", "4", "topic"), "q2": ("Article 26 education", "26", "clause")}
    (ds / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": q, "text": t, "kind": k}) for q, (t, _, k) in queries.items()),
        encoding="utf-8",
    )
    (ds / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\tudhr-art-{a}\t1\n" for q, (_, a, _) in queries.items()),
        encoding="utf-8",
    )
    result = runner.invoke(app, ["eval", str(ds), "--json", "--tier", "cold", "--legs", "hybrid"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])
    for key in (
        "ndcg@10",
        "recall@100",
        "mrr@10",
        "success@1",
        "latency_ms_p50",
        "latency_ms_p99",
        "queries",
        "cold_share",
    ):
        assert key in report
    saved = json.loads((env / "data" / "evals" / "ds-both-hybrid.json").read_text())  # for the page
    assert saved["ndcg@10"] == report["ndcg@10"] and saved["dataset"] == "ds" and saved["when"]
    assert report["queries"] == 2 and report["success@1"] == 1.0 and report["cold_share"] == 1.0
    assert set(report["by_kind"]) == {"topic", "clause"} and report["by_kind"]["clause"]["queries"] == 1
    monkeypatch.delenv("RAG_LOG_LEVEL")  # the table alone, no log lines through it
    table = runner.invoke(app, ["eval", str(ds), "--tier", "cold"])
    assert "INFO" not in table.output and "cold_share: the share of queries" in " ".join(table.output.split())
    assert table.exit_code == 0 and re.search(
        r"clause: success@1 / nDCG@10\s+│ 1\.0000 / 1\.0000", table.output
    )


@pytest.mark.slow
def test_retier_moves_what_aged_out(env: Path) -> None:
    assert runner.invoke(app, ["ingest", str(SAMPLE), "--tier", "hot"]).exit_code == 0  # 1948 forced hot
    dry = runner.invoke(app, ["retier", "--dry-run"])
    assert dry.exit_code == 0 and "30 documents past the hot window; would move 30" in dry.stdout
    moved = runner.invoke(app, ["retier"])
    assert moved.exit_code == 0 and "moved 30" in moved.output, moved.output
    again = runner.invoke(app, ["retier"])
    assert again.exit_code == 0 and "0 documents past the hot window" in again.output
    hit = runner.invoke(app, ["query", "freedom of peaceful assembly", "--json", "--top-k", "1"])
    assert json.loads(hit.stdout[hit.stdout.index("{") :])["hits"][0]["tier"] == "cold"


def test_another_embedder_on_an_index_is_one_clear_line(env: Path) -> None:
    assert runner.invoke(app, ["ingest", str(SAMPLE / "rag-router-notes.jsonl")]).exit_code == 0
    manifest = env / "data" / "index.json"
    written = json.loads(manifest.read_text())
    assert written["embedding_model"].startswith("all-MiniLM-L6-v2 | zh: ")  # the default: per language
    manifest.write_text(json.dumps({**written, "embedding_model": "some-other-model"}))
    result = runner.invoke(app, ["query", "hot and cold tiers"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "RAG_EMBEDDING__MODEL=some-other-model" in result.output


def test_eval_on_a_folder_that_is_not_beir_is_one_clear_line(env: Path) -> None:
    result = runner.invoke(app, ["eval", str(SAMPLE)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "not a BEIR-layout folder: no corpus.jsonl[.gz], queries.jsonl, qrels/test.tsv" in " ".join(
        result.output.split()
    )


def test_commands_print_their_report_without_info_lines(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAG_LOG_LEVEL")
    assert runner.invoke(app, ["ingest", str(SAMPLE / "rag-router-notes.jsonl")]).exit_code == 0
    result = runner.invoke(app, ["query", "hot and cold tiers", "--explain"])
    assert result.exit_code == 0 and " INFO " not in result.output, result.output


@pytest.mark.slow
def test_a_query_on_an_empty_index_says_so(env: Path) -> None:
    notes = SAMPLE / "rag-router-notes.jsonl"
    assert runner.invoke(app, ["ingest", str(notes)]).exit_code == 0
    for line in notes.read_text().splitlines():  # every document deleted: an index, empty
        assert runner.invoke(app, ["documents", "delete", json.loads(line)["id"]]).exit_code == 0
    result = runner.invoke(app, ["query", "hot and cold tiers"])
    assert result.exit_code == 0 and "[1]" not in result.stdout
    assert f"the index at {(env / 'data').resolve()} is empty" in " ".join(result.stderr.split())
