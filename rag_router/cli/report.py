"""What an ingest did, however it ran (in process, on Ray, or as server jobs), and its progress bar.

The report is what a script reads: it goes to stdout; the progress bar and logs go to stderr.
The exit status says how it ended: ``EXIT_FAILURES`` (3) when it finished but some files or
records failed, 1 when a server job failed or was cancelled, 2 for an error before or while
ingesting (a bad option, a server that refused), 130 when interrupted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from rag_router.cli.common import console

EXIT_FAILURES = 3  # the ingest finished, and some files or records failed

if TYPE_CHECKING:
    from indexers.ingest.results import IngestReport


@dataclass(slots=True)
class Summary:
    """What an ingest did, however it ran (the report's rows)."""

    documents: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    failed: int = 0
    chunks_written: int = 0
    seconds: float = 0.0
    chunks_embedded: int | None = None  # known in process only
    chunks_cached: int | None = None
    failures: list[tuple[str, str]] = field(default_factory=list)
    # ids read twice and stored as their last copy (--engine ray): how many, the first ones
    repeated: int = 0
    repeats: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def of_report(cls, report: IngestReport) -> Summary:
        return cls(
            documents=report.documents,
            created=report.count("created"),
            updated=report.count("updated"),
            unchanged=report.count("unchanged"),
            failed=report.count("failed"),
            chunks_written=report.chunks_written,
            seconds=report.seconds,
            chunks_embedded=report.chunks_embedded,
            chunks_cached=report.chunks_cached,
            failures=[(f.id, f.error or "failed") for f in report.failures],
            repeated=report.repeated,
            repeats=list(report.repeats),
        )

    def merge(self, other: Summary) -> None:
        for name in ("documents", "created", "updated", "unchanged", "failed", "chunks_written", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures += other.failures
        self.repeated += other.repeated
        self.repeats += other.repeats

    def add_job(self, job: dict[str, Any]) -> None:
        self.documents += job["done"] + job["failed"]
        self.created += job["created"]
        self.updated += job["updated"]
        self.unchanged += job["unchanged"]
        self.failed += job["failed"]
        self.chunks_written += job["chunks"]
        self.seconds += job["seconds"]
        self.failures += [(e["id"], e["error"]) for e in job["errors"]]


def print_report(s: Summary) -> None:
    rate = s.chunks_written / s.seconds if s.seconds > 0 else 0.0
    table = Table(title="ingest summary", show_header=False)
    rows: list[tuple[str, object]] = [
        ("documents", s.documents),
        ("created", s.created),
        ("updated", s.updated),
        ("skipped (unchanged)", s.unchanged),
        ("failed", s.failed),
        ("chunks written", s.chunks_written),
        ("chunks embedded", s.chunks_embedded),
        ("chunks from the embedding cache", s.chunks_cached),
        ("chunks/s", f"{rate:.1f}"),
        ("seconds", f"{s.seconds:.1f}"),
    ]
    for label, value in rows:
        if value is not None:
            table.add_row(label, str(value))
    Console(soft_wrap=True).print(table)
    for doc_id, error in s.failures[:20]:  # whole lines: a path or a reason is never cut
        typer.echo(f"failed {doc_id}: {error}")
    if len(s.failures) > 20:
        typer.echo(f"… and {len(s.failures) - 20} more failures")
    for source, message in s.repeats[:20]:
        typer.echo(f"repeated {source}: {message}")
    if s.repeated > 20:
        typer.echo(f"… and {s.repeated - 20} more repeated ids")


def exit_for_failures(s: Summary) -> None:
    """Exit with ``EXIT_FAILURES`` when any document failed, or an id was read twice and its
    last copy stored (--engine ray; the report says which)."""
    if s.failed:
        console.print(f"[red]{s.failed} of {s.documents} documents failed[/red]", highlight=False)
    if s.repeated:
        console.print(f"[red]{s.repeated} ids read twice: their last copy is stored[/red]", highlight=False)
    if s.failed or s.repeated:
        raise typer.Exit(EXIT_FAILURES)


def progress_bar() -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("ingesting {task.completed} docs"),
        BarColumn(),
        TextColumn("[red]{task.fields[failed]} failed"),
        TextColumn("{task.fields[chunks]} chunks · {task.fields[rate]:.1f} chunks/s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
