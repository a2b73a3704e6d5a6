"""The Ray engine's owner side: each row written in order, documents acknowledged once durable.

For a row (one unit of input) the owner adopts its cold-tier segment (with the next ones: up to
``ADOPT_GROUP`` in one transaction, sooner when a read or a delete must see it), upserts its
hot-tier points, compares what no worker could read, deletes stale chunks, and keeps the
documents' results until the next tantivy commit, then reports them (``on_batch``). Used by
``RayPipeline.ingest``.

Rows reach the owner in input order, so what it writes itself, the last copy of a document id
wins. What workers wrote to a server tier landed in whatever order the workers finished: a
document id met in more than one row is compared again after the run (``redo``).
"""

from __future__ import annotations

import asyncio
import operator
import pickle
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from indexers.ingest.prepare import Status
from indexers.ingest.results import DocResult, IngestReport, OnBatch, repeat_kept
from indexers.records import EmbeddedChunk, StoredChunk, TierName
from indexers.tiers.base import StoreTier
from indexers.tiers.cold_segment import ADOPT_GROUP
from indexers.tiers.edge_shard import PointParts
from indexers.tiers.local_cold import LocalColdTier
from indexers.tiers.qdrant_edge import QdrantEdgeTier

Key = tuple[str, str]


@dataclass(slots=True)
class _Pending:
    results: list[DocResult] = field(default_factory=list)
    chunks: int = 0


class Writer:
    """The owner's side: writes rows in order, acknowledges after each tantivy commit."""

    def __init__(
        self,
        tiers: Mapping[TierName, StoreTier],
        report: IngestReport,
        *,
        commit_chunks: int,
        on_batch: OnBatch | None,
        collect: bool,
        read_by_workers: Iterable[TierName],
        written_by_workers: Iterable[TierName] = (),
    ) -> None:
        self._tiers = tiers
        cold = tiers.get("cold")
        self._cold = cold if isinstance(cold, LocalColdTier) else None
        self._commit_every = commit_chunks
        self._report = report
        self._on_batch = on_batch
        self._collect = collect
        self._unread = [t for t in self._tiers if t not in set(read_by_workers)]
        self._served = bool(set(written_by_workers))
        self._seen: set[Key] = set()
        self.redo: dict[Key, str] = {}  # documents to compare again after the run → their unit
        self.withheld: dict[Key, DocResult] = {}  # how the owner found each copy in ``redo``
        self._segments: list[Path] = []  # received, adopted with the next ones (``_adopt``)
        self._unadopted: list[DocResult] = []  # results of rows whose segments may wait in there
        self._pending = _Pending()  # results whose chunks are in: acknowledged at the next commit
        # commits under way (None: nothing for tantivy to commit) and the results they make durable
        self._committing: deque[tuple[Future[None] | None, _Pending]] = deque()
        self._uncommitted = False  # segments adopted since the last commit was queued
        self._t0 = time.time()  # the run's start on the wall clock the workers' "<stage>_at" use

    async def write(self, batch: dict[str, Any]) -> None:
        for i in range(len(batch["meta"])):
            row = {k: batch[k][i] for k in batch}
            row.update(pickle.loads(row.pop("meta")))
            row["hot"] = pickle.loads(row["hot"])
            await self._row(row)
        if self._pending.chunks >= self._commit_every:
            await self.commit()
        await self._acknowledge(wait=False)

    async def _row(self, row: dict[str, Any]) -> None:
        report = self._report
        for stage in ("prepare", "embed", "build"):
            report.stage_seconds[stage] = report.stage_seconds.get(stage, 0.0) + float(row[f"{stage}_s"])
            report.finished(stage, float(row[f"{stage}_at"]) - self._t0)
        # the embedding actors: a batch in; the actor started, torch imported, the model ready
        for span in ("arrived", "actor", "torch", "model"):
            if float(row[f"{span}_at"]):
                report.finished(span, float(row[f"{span}_at"]) - self._t0)
        results: list[DocResult] = list(row["results"])
        checks = list(row["check"])
        again = {(t, d) for t, d, _, _ in checks if (t, d) in self._seen}
        self._report_repeats(row, checks, again)
        if again:  # what the tier holds of them now includes the segments not adopted yet
            await self._adopt()
        held = await self._held(checks, again)
        embedded: list[tuple[TierName, EmbeddedChunk, PointParts | None]] = list(row["hot"])
        hot = [(t, e, p) for t, e, p in embedded if _held_hash(held, t, e) != e.chunk.content_hash]
        path, cold_n = str(row["segment"]), int(row["segment_rows"])
        if path:
            self._segments.append(Path(path))
        began = time.perf_counter()
        await self._upsert(hot)
        report.timed("write", began)
        stale = {(t, tenant, cid) for t, tenant, cid in row["stale"]}
        rewritten: set[Key] = set()  # documents held whose chunks this row replaced by others
        for tenant, doc_id, tier, new in checks:
            mine = held.get((tenant, doc_id))
            if not mine:  # nothing held that no worker saw (a rerun: every document)
                continue
            keep = {(tier, cid) for cid, _ in new}
            for where, cid in mine:
                if (where, cid) not in keep and (new or where != tier):
                    stale.add((where, tenant, cid))
            if any(mine.get((tier, cid)) != h for cid, h in new):
                rewritten.add((tenant, doc_id))
        if stale and path:  # the new chunks (in this row's segment) are in before any goes
            await self._adopt()
        began = time.perf_counter()
        await self._delete(stale)
        report.timed("write", began)
        report.finished("write", time.time() - self._t0)
        self._seen.update(map(_doc_key, checks))
        written = {(e.chunk.tenant, e.chunk.doc_id) for _, e, _ in hot} | rewritten
        now = _restated(results, held, stale, written)
        if again or self.withheld or self.redo:
            self._unadopted += self._copies(results, now, row["unit"], again)
        else:  # no document id met twice so far (the common case): each as found
            self._unadopted += now
        if len(self._segments) >= ADOPT_GROUP:
            await self._adopt()
        served = int(row["served_rows"])  # written to server tiers by a worker, acknowledged
        self._pending.chunks += cold_n + len(hot) + served
        report.chunks_written += cold_n + len(hot) + served
        report.chunks_embedded += cold_n + len(embedded) + served

    def _report_repeats(
        self, row: dict[str, Any], checks: Sequence[tuple[str, str, Any, Any]], again: set[Key]
    ) -> None:
        """Each id read again is a line of the report: within the row's unit (its worker kept the
        last copy), or met in an earlier row (``again``; an id that is its content's hash, whose
        source is "", is the same text and passes)."""
        for source, message in row["repeats"]:
            self._report.repeat(source, message)
        if again:
            for (tenant, doc_id, _, _), source in zip(checks, row["sources"], strict=True):
                if source and (tenant, doc_id) in again:
                    self._report.repeat(source, repeat_kept(doc_id))

    def _copies(
        self, found: list[DocResult], now: list[DocResult], unit: str, again: set[Key]
    ) -> list[DocResult]:
        """The results to report of a row holding ids met before: a copy withheld earlier is
        reported as it was found (the redo is for the last copy), and a later copy written
        here in order is the last so far (no redo for it then)."""
        out = []
        for was, r in zip(found, now, strict=True):
            doc: Key = (r.tenant or "", r.id)
            earlier = self.withheld.pop(doc, None)
            out += [earlier] if earlier is not None else []
            if self._repeated(was.status, r, unit, again):
                self.withheld[doc] = r
            else:
                self.redo.pop(doc, None)
                out.append(r)
        return out

    async def _adopt(self) -> None:
        """The cold tier adopts the segments received since the last time, in one transaction."""
        segments, self._segments = self._segments, []
        if segments:
            assert self._cold is not None
            began = time.perf_counter()
            try:
                await asyncio.to_thread(self._cold.local.adopt, segments)
            except BaseException:
                self._unadopted = []  # not in the tier: those documents are never acknowledged
                raise
            self._uncommitted = True
            for path in segments:
                await asyncio.to_thread(path.unlink, missing_ok=True)
            self._report.timed("write", began)
        self._pending.results += self._unadopted
        self._unadopted = []

    def _repeated(self, found: Status, r: DocResult, unit: str, again: set[Key]) -> bool:
        """A later copy of an id met earlier in this run, which its worker ``found`` other than
        created: it compared the copy with what a tier held before (maybe before the earlier copy
        was written), so it skipped it as unchanged, or wrote only the chunks that differed from
        that older state. Or any later copy when workers write to a server tier: which copy
        landed last is unknown. Kept for ``_redo``, which compares the last copy with what is
        stored after the run. (A copy found created was written whole, in order: it stands.)"""
        key = (r.tenant or "", r.id)
        if key not in again or (found == "created" and not self._served):
            return False
        self.redo[key] = unit
        return True

    async def _upsert(self, items: Sequence[tuple[TierName, EmbeddedChunk, PointParts | None]]) -> None:
        for name in {t for t, _, _ in items}:
            tier = self._tiers[name]
            mine = [(e, p) for t, e, p in items if t == name]
            parts = [p for _, p in mine if p is not None]
            if isinstance(tier, QdrantEdgeTier) and len(parts) == len(mine):
                await tier.upsert_parts(parts)
            else:
                await tier.upsert([e for e, _ in mine])

    async def _held(
        self, checks: Sequence[tuple[str, str, TierName, list[tuple[str, str]]]], again: set[Key]
    ) -> dict[Key, dict[tuple[TierName, str], str]]:
        """What the tiers no worker could read hold of these documents (and, for a document seen
        earlier in this run, what every tier holds now)."""
        out: dict[Key, dict[tuple[TierName, str], str]] = {}
        by_tenant: dict[str, list[str]] = {}
        for tenant, doc_id, _, _ in checks:
            by_tenant.setdefault(tenant, []).append(doc_id)
        for tenant, ids in by_tenant.items():
            for name, tier in self._tiers.items():
                wanted = ids if name in self._unread else [d for d in ids if (tenant, d) in again]
                if not wanted:
                    continue
                stored: list[StoredChunk] = await tier.fetch(tenant, wanted)
                for c in stored:
                    out.setdefault((tenant, c.doc_id), {})[(name, c.chunk_id)] = c.content_hash
        return out

    async def _delete(self, stale: set[tuple[TierName, str, str]]) -> None:
        groups: dict[tuple[TierName, str], list[str]] = {}
        for tier, tenant, cid in stale:
            groups.setdefault((tier, tenant), []).append(cid)
        for (tier, tenant), ids in groups.items():
            await self._tiers[tier].delete(tenant, sorted(ids))

    async def commit(self) -> None:
        """tantivy commits what was adopted so far, behind the rows it is being fed; the owner
        goes on adopting meanwhile, and those documents are acknowledged once it has committed
        (``_acknowledge``): durable and searchable."""
        await self._adopt()
        pending, self._pending = self._pending, _Pending()
        future = None
        if self._cold is not None and self._uncommitted:
            future = self._cold.local.bulk_commit_later()
            self._uncommitted = False
        self._committing.append((future, pending))
        await self._acknowledge(wait=False)

    async def finish(self) -> None:
        """Commit what is left and acknowledge everything committed (raises if a commit failed:
        its documents and every later one stay unacknowledged)."""
        await self.commit()
        began = time.perf_counter()
        await self._acknowledge(wait=True)
        self._report.timed("commit", began)

    async def _acknowledge(self, *, wait: bool) -> None:
        """Report the documents of each commit done so far, in order (``wait``: all of them)."""
        while self._committing:
            future, pending = self._committing[0]
            if future is not None and not (wait or future.done()):
                return
            if future is not None:
                await asyncio.wrap_future(future)
            self._committing.popleft()
            if not pending.results:
                continue
            self._report.add(pending.results, self._collect)
            if self._on_batch is not None:
                done = self._on_batch(pending.results, self._report)
                if done is not None:
                    await done


_doc_key = operator.itemgetter(0, 1)  # a check's (tenant, doc id)


def _held_hash(
    held: Mapping[Key, Mapping[tuple[TierName, str], str]], tier: TierName, e: EmbeddedChunk
) -> str:
    return held.get((e.chunk.tenant, e.chunk.doc_id), {}).get((tier, e.chunk.chunk_id), "")


def _restated(
    results: list[DocResult],
    held: Mapping[Key, Mapping[Any, str]],
    stale: set[tuple[TierName, str, str]],
    written: set[Key],
) -> list[DocResult]:
    """A document's status, knowing also what the tiers no worker read held of it."""
    gone = {(tenant, cid.rsplit("#", 1)[0]) for _, tenant, cid in stale}
    out = []
    for r in results:
        key = (r.tenant or "", r.id)
        status: Status = r.status
        if r.status != "failed" and held.get(key):
            changed = key in gone or key in written or r.status == "updated"
            status = "updated" if changed else "unchanged"
        elif r.status == "unchanged" and key in gone:
            status = "updated"
        # as the worker found it, mostly (a rerun: every document unchanged): the same object
        out.append(r if status == r.status else DocResult(r.id, status, r.chunks, r.tier, r.error, r.tenant))
    return out
