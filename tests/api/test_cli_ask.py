"""`rag-router ask` in process: the answer with its sources, declines as exit status 4, --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_router.cli import app

runner = CliRunner()


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("RAG_URL", raising=False)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "travel.md").write_text(
        "# Travel policy\n\n## Section 1. Hotels\n\nThe hotel limit is 140 EUR per night.\n\n"
        "## Section 2. Mileage\n\nPrivate cars are reimbursed at 0.30 EUR per kilometre.\n",
        encoding="utf-8",
    )
    (folder / "手册.md").write_text(
        "# 员工手册\n\n第一条 员工入职满一年后享受带薪年休假五天。\n\n"
        "第二条 员工本人结婚可以享受婚假十天。\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["ingest", str(folder)])
    assert result.exit_code == 0, result.output
    return folder


def test_ask_prints_the_answer_then_its_sources(store: Path) -> None:
    result = runner.invoke(app, ["ask", "How much is the hotel limit per night?"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "140 EUR" in lines[0] and "[1]" in lines[0]
    assert lines[1] == "[1] travel.md — Travel policy, section 1"


def test_ask_in_chinese_cites_the_article(store: Path) -> None:
    result = runner.invoke(app, ["ask", "员工结婚可以休几天婚假？"])
    assert result.exit_code == 0, result.output
    assert "婚假十天" in result.stdout and "[1] 手册.md — 员工手册, article 2" in result.stdout


def test_a_declined_question_exits_4_and_says_why(store: Path) -> None:
    result = runner.invoke(app, ["ask", "What does Section 12 of the travel policy say?"])
    assert result.exit_code == 4, result.output
    assert "Section 12" in result.stdout  # the decline names what is missing
    assert "declined:" in result.stderr


def test_ask_json_is_the_answer_response(store: Path) -> None:
    result = runner.invoke(app, ["ask", "What is the mileage rate?", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["abstained"] is False and "0.30 EUR" in body["answer"]
    assert body["citations"][0]["doc_id"] == "travel.md"
