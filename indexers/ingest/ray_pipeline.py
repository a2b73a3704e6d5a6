"""The Ray engine's owner: starts the dataflow (``indexers.ingest.ray_engine``), writes, acknowledges.

Same contract as ``Pipeline.ingest``: an ``IngestReport``, ``on_batch`` called with documents
once they are durable, ``cancel`` honoured between batches. The tiers stay in this process
(the embedded engines are single-writer); the work around them runs on the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import os
import pickle
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from indexers.embed.embedder import AsyncEmbedder, Embedder, PassEmbedder
from indexers.ingest.load import LoadOptions
from indexers.ingest.pipeline import DocResult, IngestReport, OnBatch, Pipeline, Placement
from indexers.ingest.prepare import Status
from indexers.ingest.ray_engine import (
    EmbedActor,
    Spec,
    Unit,
    build_segments,
    plan_units,
    prepare_units,
    read_unit,
)
from indexers.records import Document, EmbeddedChunk, StoredChunk, TierName
from indexers.text.chunk import Chunker
from indexers.text.lexical import Analyzer
from indexers.tiers.base import StoreTier
from indexers.tiers.cold_segment import ColdLookup, write_lookup
from indexers.tiers.cold_vectors import KMeans
from indexers.tiers.edge_shard import PointParts
from indexers.tiers.kmeans import torch_kmeans
from indexers.tiers.local_cold import LocalColdTier
from indexers.tiers.qdrant_edge import QdrantEdgeTier

Key = tuple[str, str]
# Many worker processes tokenize at once: each one single-threaded (no oversubscription).
RUNTIME_ENV = {"env_vars": {"TOKENIZERS_PARALLELISM": "false"}}


@dataclass(frozen=True, slots=True)
class RayOptions:
    address: str | None = None  # None: start a local Ray (``num_cpus`` cores) for this run
    num_cpus: int | None = None
    gpus: int | None = None  # embedding actors on GPUs; None: every GPU Ray sees
    cpu_actors: int = 1  # embedding actors when there is no GPU
    unit_mb: float = 1.0  # input per prepare task
    embed_units: int = 4  # units per embedding call (a GPU wants thousands of chunks at once)
    commit_chunks: int = 65_536  # chunks adopted between tantivy commits (and acknowledgements)


@dataclass(slots=True)
class _Pending:
    results: list[DocResult] = field(default_factory=list)
    chunks: int = 0


class RayPipeline:
    def __init__(
        self,
        *,
        embedder: PassEmbedder,
        make_embedder: Callable[[], PassEmbedder],
        chunker: Chunker,
        analyzer: Analyzer,
        tiers: Mapping[TierName, StoreTier],
        hot_window_days: int = 365,
        today: Callable[[], dt.date] = dt.date.today,
        options: RayOptions = RayOptions(),
    ) -> None:
        self._embedder = embedder
        self._make_embedder = make_embedder
        self._chunker = chunker
        self._analyzer = analyzer
        self._tiers = tiers
        self._hot_window_days = hot_window_days
        self._today = today
        self._options = options
        cold = tiers.get("cold")
        self._cold = cold if isinstance(cold, LocalColdTier) else None

    async def _spec(self, load: LoadOptions, placement: Placement, folder: Path) -> Spec:
        lookups: dict[TierName, ColdLookup] = {}
        if self._cold is not None:
            lookups["cold"] = self._cold.local.lookup()
        hot = self._tiers.get("hot")
        if isinstance(hot, QdrantEdgeTier):  # workers cannot open it: they read a copy of its hashes
            path = folder / "hot.lookup"
            await asyncio.to_thread(write_lookup, path, hot.shards.hashes())
            lookups["hot"] = ColdLookup(path)
        return Spec(
            options=load,
            tokenizers=self._embedder.tokenizers(),
            max_tokens=self._chunker.max_tokens,
            overlap_tokens=self._chunker.overlap_tokens,
            placement=placement,
            hot_window_days=self._hot_window_days,
            today=self._today(),
            lookups=lookups,
        )

    async def ingest(
        self,
        paths: Iterable[Path],
        *,
        load: LoadOptions = LoadOptions(),
        placement: Placement = "auto",
        on_batch: OnBatch | None = None,
        cancel: asyncio.Event | None = None,
        collect: bool = False,
    ) -> IngestReport:
        if callable(placement) or placement not in ("auto", "hot", "cold"):
            raise ValueError("the Ray engine places by 'auto', 'hot' or 'cold'")
        report = IngestReport()
        started = time.perf_counter()
        segments = self._segment_folder()
        spec = await self._spec(load, placement, segments)
        if self._cold is not None:
            await asyncio.to_thread(
                self._cold.local.bulk_begin, threads=min(8, os.cpu_count() or 1), kmeans=_gpu_kmeans()
            )
        units = plan_units(list(paths), load, int(self._options.unit_mb * 1024 * 1024))
        writer = _Writer(self, report, on_batch, collect, spec.lookups.keys())
        try:
            with _ray(self._options):
                batches = self._dataflow(units, spec, segments)
                while (batch := await asyncio.to_thread(next, batches, None)) is not None:
                    if cancel is not None and cancel.is_set():
                        report.cancelled = True
                        break
                    await writer.write(batch)
                    report.seconds = time.perf_counter() - started
        finally:
            await writer.commit()
            if self._cold is not None:
                await asyncio.to_thread(self._cold.local.bulk_end)
                for stage, seconds in self._cold.local.bulk_seconds.items():
                    report.stage_seconds[f"cold_{stage}"] = seconds
                self._cold.local.bulk_seconds.clear()
            for stray in [*segments.glob("*.segment*"), segments / "hot.lookup"]:
                stray.unlink(missing_ok=True)
        if writer.redo and not report.cancelled:
            await self._redo(writer.redo, load, placement, report, on_batch, collect)
        report.seconds = time.perf_counter() - started
        return report

    async def _redo(
        self,
        redo: Mapping[Key, str],
        load: LoadOptions,
        placement: Placement,
        report: IngestReport,
        on_batch: OnBatch | None,
        collect: bool,
    ) -> None:
        """Copies of an id that a worker compared before an earlier copy in the same run was
        written (it found them unchanged against the old state): the last copy of each, read
        again from its unit, goes through the in-process pipeline, which compares it with what
        is stored now. The last copy wins, as in process."""
        last: dict[Key, Document] = {}
        for raw in sorted(set(redo.values())):
            for item in read_unit(Unit.of(raw), load):
                if isinstance(item, Document) and redo.get((item.tenant, item.id)) == raw:
                    last[(item.tenant, item.id)] = item
        worker = AsyncEmbedder(cast(Embedder, self._embedder))  # its subclasses are Embedders
        try:
            pipeline = Pipeline(
                embedder=worker,
                chunker=self._chunker,
                tiers=self._tiers,
                hot_window_days=self._hot_window_days,
                today=self._today,
            )
            again = await pipeline.ingest(list(last.values()), placement=placement, collect=True)
        finally:
            worker.close()
        report.add(again.results, collect)
        report.chunks_written += again.chunks_written
        report.chunks_embedded += again.chunks_embedded
        if on_batch is not None:
            done = on_batch(again.results, report)
            if done is not None:
                await done

    def _hot_avg_len(self) -> float | None:
        hot = self._tiers.get("hot")
        return hot.shards.avg_len if isinstance(hot, QdrantEdgeTier) else None

    def _segment_folder(self) -> Path:
        if self._cold is None:  # nothing to adopt: a place for the hot tier's lookup copy
            return Path(tempfile.mkdtemp(prefix="rag-router-ray-"))
        folder = self._cold.local.lookup().path.parent / "segments"
        folder.mkdir(parents=True, exist_ok=True)
        for stray in folder.glob("*.segment*"):  # a run killed before adopting them
            stray.unlink(missing_ok=True)
        return folder

    def _dataflow(self, units: Sequence[Any], spec: Spec, segments: Path) -> Iterator[dict[str, Any]]:
        import ray

        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True  # the last copy of a document id wins
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        ctx.op_resource_reservation_enabled = False  # prepare may take every free core
        gpus = self._options.gpus
        if gpus is None:
            gpus = int(ray.cluster_resources().get("GPU", 0))  # type: ignore[no-untyped-call]
        actors = gpus or self._options.cpu_actors
        items = [{"unit": json.dumps(dataclasses.asdict(u))} for u in units]  # Arrow-friendly
        ds: Any = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        ds = ds.map_batches(prepare_units, fn_kwargs={"spec": spec}, batch_size=1, batch_format="numpy")
        # On a GPU, prepare runs as tasks on every core; on CPUs only, Ray fuses it into the
        # embedding actors (the model is the whole cost there, and nothing is copied between).
        threads = None if gpus else max(1, int(ray.cluster_resources().get("CPU", 1)) // actors)  # type: ignore[no-untyped-call]
        ds = ds.map_batches(
            EmbedActor,
            fn_constructor_kwargs={"make_embedder": self._make_embedder, "threads": threads},
            batch_size=self._options.embed_units,
            batch_format="numpy",
            num_gpus=1 if gpus else 0,
            compute=ray.data.ActorPoolStrategy(size=actors),
        )
        ds = ds.map_batches(
            build_segments,
            fn_kwargs={
                "folder": str(segments),
                "analyzer": self._analyzer,
                "hot_avg_len": self._hot_avg_len(),
            },
            batch_size=1,
            batch_format="numpy",
        )
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy", prefetch_batches=4):
            yield dict(batch)


def _gpu_kmeans() -> KMeans | None:
    """The IVF lists trained on this process's GPU when it has one (the owner holds no model)."""
    try:
        import torch
    except ImportError:
        return None
    return torch_kmeans("cuda") if torch.cuda.is_available() else None


@contextlib.contextmanager
def _ray(options: RayOptions) -> Iterator[None]:
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError("--engine ray needs Ray: pip install 'rag-router[ray]'") from exc
    started = not ray.is_initialized()
    if started:
        ray.init(
            address=options.address,
            num_cpus=options.num_cpus if options.address is None else None,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            runtime_env=RUNTIME_ENV,
        )
    try:
        yield
    finally:
        if started:
            ray.shutdown()


class _Writer:
    """The owner's side: writes rows in order, acknowledges after each tantivy commit."""

    def __init__(
        self,
        owner: RayPipeline,
        report: IngestReport,
        on_batch: OnBatch | None,
        collect: bool,
        read_by_workers: Iterable[TierName],
    ) -> None:
        self._tiers = owner._tiers
        self._cold = owner._cold
        self._commit_every = owner._options.commit_chunks
        self._report = report
        self._on_batch = on_batch
        self._collect = collect
        self._unread = [t for t in self._tiers if t not in set(read_by_workers)]
        self._seen: set[Key] = set()
        self._changed: set[Key] = set()  # documents this run wrote
        self.redo: dict[Key, str] = {}  # documents to compare again after the run → their unit
        self._pending = _Pending()

    async def write(self, batch: dict[str, Any]) -> None:
        for i in range(len(batch["meta"])):
            row = {k: batch[k][i] for k in batch}
            row.update(pickle.loads(row.pop("meta")))
            row["hot"] = pickle.loads(row["hot"])
            await self._row(row)
        if self._pending.chunks >= self._commit_every:
            await self.commit()

    async def _row(self, row: dict[str, Any]) -> None:
        report = self._report
        for stage in ("prepare", "embed", "build"):
            report.stage_seconds[stage] = report.stage_seconds.get(stage, 0.0) + float(row[f"{stage}_s"])
        results: list[DocResult] = list(row["results"])
        checks = list(row["check"])
        again = {(t, d) for t, d, _, _ in checks if (t, d) in self._seen}
        held = await self._held(checks, again)
        embedded: list[tuple[TierName, EmbeddedChunk, PointParts | None]] = list(row["hot"])
        hot = [(t, e, p) for t, e, p in embedded if _held_hash(held, t, e) != e.chunk.content_hash]
        began = time.perf_counter()
        path, cold_n = str(row["segment"]), int(row["segment_rows"])
        if path:
            assert self._cold is not None
            await asyncio.to_thread(self._cold.local.adopt, Path(path))
            await asyncio.to_thread(Path(path).unlink, missing_ok=True)
        await self._upsert(hot)
        stale = {(t, tenant, cid) for t, tenant, cid in row["stale"]}
        for tenant, doc_id, tier, new_ids in checks:
            keep = {(tier, cid) for cid in new_ids}
            for key in held.get((tenant, doc_id), {}):
                if key not in keep and (new_ids or key[0] != tier):
                    stale.add((key[0], tenant, key[1]))
        await self._delete(stale)
        report.timed("write", began)
        self._seen.update((t, d) for t, d, _, _ in checks)
        written = {(e.chunk.tenant, e.chunk.doc_id) for _, e, _ in hot}
        restated = [r for r in _restated(results, held, stale, written) if not self._repeated(r, row["unit"])]
        self._changed.update((r.tenant or "", r.id) for r in restated if r.status in ("created", "updated"))
        self._pending.results += restated
        self._pending.chunks += cold_n + len(hot)
        report.chunks_written += cold_n + len(hot)
        report.chunks_embedded += cold_n + len(embedded)

    def _repeated(self, r: DocResult, unit: str) -> bool:
        """A copy found unchanged by a worker that compared it before an earlier copy of the same
        id in this run was written: what is stored now is that earlier copy. Kept for ``_redo``."""
        key = (r.tenant or "", r.id)
        if r.status != "unchanged" or key not in self._changed:
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
        self, checks: Sequence[tuple[str, str, TierName, list[str]]], again: set[Key]
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
        """tantivy commits what was adopted; those documents are now durable and searchable."""
        if self._cold is not None:
            began = time.perf_counter()
            await asyncio.to_thread(self._cold.local.bulk_commit)
            self._report.timed("commit", began)
        pending, self._pending = self._pending, _Pending()
        if not pending.results:
            return
        self._report.add(pending.results, self._collect)
        if self._on_batch is not None:
            done = self._on_batch(pending.results, self._report)
            if done is not None:
                await done


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
        out.append(DocResult(r.id, status, r.chunks, r.tier, r.error, r.tenant))
    return out
