"""The ingest report's repeated ids (--engine ray stores the last copy): printed, and exit 3."""

from __future__ import annotations

import pytest
import typer

from indexers.ingest.results import IngestReport, repeat_kept
from rag_router.cli.report import EXIT_FAILURES, Summary, exit_for_failures, print_report


def test_a_repeated_id_is_printed_and_exits_as_a_failure(capsys: pytest.CaptureFixture[str]) -> None:
    report = IngestReport(counts={"created": 2})
    report.repeat("b.jsonl@0", repeat_kept("x"))
    summary = Summary.of_report(report)
    print_report(summary)
    out = capsys.readouterr().out
    assert "repeated b.jsonl@0: id 'x' read twice in this ingest: the last copy is stored" in out
    with pytest.raises(typer.Exit) as exited:
        exit_for_failures(summary)
    assert exited.value.exit_code == EXIT_FAILURES
    exit_for_failures(Summary.of_report(IngestReport(counts={"created": 2})))  # none: no exit
