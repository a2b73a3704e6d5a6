"""What an ingestion run reports (per document and in total), and where a document goes.

Shared by both engines (``pipeline`` in process, ``ray.pipeline`` on Ray), the job runner and
ledger, and the service's metrics.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from indexers.ingest.prepare import Status
from indexers.records import Document, TierName

Placement = Literal["auto", "hot", "cold"]
Placer = Callable[[Document], TierName]
MAX_FAILURES_KEPT = 1000


@dataclass(frozen=True, slots=True)
class DocResult:
    id: str
    status: Status
    chunks: int = 0
    tier: TierName | None = None
    error: str | None = None
    tenant: str | None = None

    def __reduce__(self) -> tuple[type[DocResult], tuple[Any, ...]]:
        """Pickled as its constructor's arguments: the Ray engine ships one per document to the
        owner, and a frozen slots dataclass's default (``fields()`` per object) was 40 % of the
        owner's time on a rerun of unchanged documents."""
        return (DocResult, (self.id, self.status, self.chunks, self.tier, self.error, self.tenant))


@dataclass(slots=True)
class IngestReport:
    """Counts for the whole run; per-document results only when asked for (memory stays flat)."""

    counts: dict[Status, int] = field(default_factory=dict)
    failures: list[DocResult] = field(default_factory=list)  # the first MAX_FAILURES_KEPT
    results: list[DocResult] = field(default_factory=list)  # only with ``collect=True``
    chunks_written: int = 0
    chunks_embedded: int = 0
    chunks_cached: int = 0
    seconds: float = 0.0
    cancelled: bool = False
    stage_seconds: dict[str, float] = field(default_factory=dict)  # busy time: read, diff, embed, write
    # when each stage finished its first and its last piece of work, seconds from the start
    # (the Ray engine: which stage the others waited for)
    stage_spans: dict[str, tuple[float, float]] = field(default_factory=dict)
    # ids read again in this run and stored as their last copy (the Ray engine, which cannot
    # refuse them): how many, and the first MAX_FAILURES_KEPT as (source, message)
    repeated: int = 0
    repeats: list[tuple[str, str]] = field(default_factory=list)

    def timed(self, stage: str, started: float) -> None:
        self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + time.perf_counter() - started

    def finished(self, stage: str, at: float) -> None:
        first, last = self.stage_spans.get(stage, (at, at))
        self.stage_spans[stage] = (min(first, at), max(last, at))

    def count(self, status: Status) -> int:
        return self.counts.get(status, 0)

    @property
    def documents(self) -> int:
        return sum(self.counts.values())

    @property
    def chunks_per_s(self) -> float:
        return self.chunks_written / self.seconds if self.seconds > 0 else 0.0

    def add(self, results: Sequence[DocResult], collect: bool) -> None:
        for r in results:
            self.counts[r.status] = self.counts.get(r.status, 0) + 1
            if r.status == "failed" and len(self.failures) < MAX_FAILURES_KEPT:
                self.failures.append(r)
        if collect:
            self.results.extend(results)

    def repeat(self, source: str, message: str) -> None:
        self.repeated += 1
        if len(self.repeats) < MAX_FAILURES_KEPT:
            self.repeats.append((source, message))


def repeat_kept(doc_id: str) -> str:
    """What the report says of an id read again by the Ray engine, which stores its last copy."""
    kept = "the last copy is stored (--engine ray does not refuse repeats)"
    return f"id {doc_id!r} read twice in this ingest: {kept}"


OnBatch = Callable[[Sequence[DocResult], IngestReport], Awaitable[None] | None]


def place(doc: Document, placement: Placement | Placer, hot_window_days: int, today: dt.date) -> TierName:
    """Hot when dated inside the window or undated; cold when older; or as forced."""
    if callable(placement):
        return placement(doc)
    if placement != "auto":
        return placement
    date = doc.date
    if date is None and doc.year is not None:
        date = dt.date(doc.year, 12, 31)
    return "hot" if date is None or date >= today - dt.timedelta(days=hot_window_days) else "cold"
