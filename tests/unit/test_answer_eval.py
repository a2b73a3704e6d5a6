"""Answer evaluation: scored exactly as shared/tools/answers_eval.py scores the API, and
`rag-router eval DATASET --answers` end to end on a set made here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_router.cli import app
from rag_router.evaluation.answers import Given, Judged, norm, score
from tests.conftest import SAMPLE


def judged(kind: str, answers: tuple[str, ...] = (), doc: str | None = "d1") -> Judged:
    return Judged("q", "question", kind, doc, answers)


def test_norm_is_squad_normalisation_and_drops_chinese_punctuation() -> None:
    assert norm("The  Normans, in France!") == "normans in france"
    assert norm("诊断证明；病历。") == "诊断证明病历"


def test_the_figures() -> None:
    rows = [
        (judged("answerable", ("1 August 1944",)), Given("It began on 1 August 1944. [1]", ("d1",), False)),
        # the gold after the first citation: in the answer, not in the lead
        (
            judged("answerable", ("ships",)),
            Given("Engines drive. [1] Ships use them. [2]", ("d2", "d1"), False),
        ),
        (judged("answerable", ("x",)), Given("Nothing relevant is stored.", (), True)),
        (judged("out_of_corpus", doc=None), Given("Nothing relevant is stored.", (), True)),
        (judged("out_of_corpus", doc=None), Given("Something. [1]", ("d3",), False)),
    ]
    report = score(rows)
    assert report["gold@answer"] == pytest.approx(2 / 3) and report["gold@lead"] == pytest.approx(1 / 3)
    assert report["cite@gold"] == pytest.approx(1 / 3) and report["false_abst"] == pytest.approx(1 / 3)
    assert report["abst@ooc"] == 0.5 and report["abst@unans"] is None
    # the tool's median (the upper one of an even count), of the answers not declined
    assert report["median_chars"] == len("Engines drive. [1] Ships use them. [2]")
    assert report["by_kind"]["out_of_corpus"]["abst@ooc"] == 0.5 and report["queries"] == 5


def test_eval_answers_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_LOG_LEVEL", "WARNING")
    ds = tmp_path / "qa"
    ds.mkdir()
    shutil.copy(SAMPLE / "udhr.jsonl", ds / "corpus.jsonl")
    questions = {
        "q1": ("Is slavery allowed?", "answerable", "udhr-art-4", ["slavery"]),
        "q2": ("What is NSFNET?", "out_of_corpus", None, []),
    }
    (ds / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": q, "text": t}) for q, (t, *_) in questions.items()), encoding="utf-8"
    )
    (ds / "answers.jsonl").write_text(
        "\n".join(
            json.dumps({"query_id": q, "kind": k, "doc_id": d, "answers": a})
            for q, (_, k, d, a) in questions.items()
        ),
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["eval", str(ds), "--answers", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["gold@lead"] == 1.0 and report["cite@gold"] == 1.0 and report["false_abst"] == 0.0
    assert report["abst@ooc"] == 1.0 and report["queries"] == 2
    saved = json.loads((tmp_path / "data" / "evals" / "qa-auto-answers.json").read_text())  # for the page
    assert saved["gold@lead"] == 1.0 and saved["dataset"] == "qa" and saved["legs"] == "answers"
