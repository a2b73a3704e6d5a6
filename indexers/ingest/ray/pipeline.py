"""The Ray engine's owner: starts the dataflow (``indexers.ingest.ray.engine``), writes, acknowledges.

Same contract as ``Pipeline.ingest``: an ``IngestReport``, ``on_batch`` called with documents
once they are durable, ``cancel`` honoured between batches. The embedded tiers stay in this
process (they are single-writer) and the work around them runs on the cluster; a server tier
(``servers``) is read and written by the workers themselves, each through its own client.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import functools
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from indexers.embed.base import PassEmbedder
from indexers.embed.embedder import AsyncEmbedder, Embedder
from indexers.ingest.load import LoadOptions
from indexers.ingest.pipeline import Pipeline
from indexers.ingest.ray.engine import EmbedActor, Spec, build_segments, prepare_units
from indexers.ingest.ray.owner import Key, Writer
from indexers.ingest.ray.tiers import Lookup, Server
from indexers.ingest.ray.units import Unit, plan_units, read_unit, taper
from indexers.ingest.results import DocResult, IngestReport, OnBatch, Placement
from indexers.records import Document, TierName
from indexers.text.chunk import Chunker
from indexers.text.lexical import Analyzer
from indexers.tiers.base import StoreTier
from indexers.tiers.cold_segment import ColdLookup, write_lookup
from indexers.tiers.cold_vectors import KMeans
from indexers.tiers.kmeans import torch_kmeans
from indexers.tiers.local_cold import LocalColdTier
from indexers.tiers.qdrant_edge import QdrantEdgeTier

# Many worker processes tokenize at once: each one single-threaded (no oversubscription).
RUNTIME_ENV = {"env_vars": {"TOKENIZERS_PARALLELISM": "false"}}


@dataclass(frozen=True, slots=True)
class RayOptions:
    address: str | None = None  # None: start a local Ray (``num_cpus`` cores) for this run
    num_cpus: int | None = None
    gpus: int | None = None  # embedding actors on GPUs; None: every GPU Ray sees
    cpu_actors: int = 1  # embedding actors when there is no GPU
    # Embedding actors sharing each GPU: an actor's own CPU work (unpacking rows, padding, the
    # copy to the device and back) leaves the GPU idle; several actors overlap it.
    actors_per_gpu: int = 2
    unit_mb: float = 1.0  # input per prepare task
    # The last wave of units (a unit a core) cut into this many each: the run's end drains sooner
    # (``indexers.ingest.ray.units.taper``; 1: no cutting).
    taper: int = 4
    embed_units: int = 4  # units per embedding call (a GPU wants thousands of chunks at once)
    commit_chunks: int = 65_536  # chunks adopted between tantivy commits (and acknowledgements)
    # Build tasks at once when they write to a server tier: each holds one client and sends its
    # rows in the adapter's acknowledged batches (Elasticsearch: 500 a bulk request, Qdrant: 256
    # points), so this bounds the requests in flight against the server.
    write_concurrency: int = 8


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
        servers: Mapping[TierName, Callable[[], StoreTier]] | None = None,
    ) -> None:
        """``servers``: for each of ``tiers`` on a server (Qdrant, Elasticsearch), a picklable
        function that opens it anew (a worker's own client to the same collection or index)."""
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
        self._servers = {name: Server(open_) for name, open_ in (servers or {}).items()}
        if unknown := set(self._servers) - set(tiers):
            raise ValueError(f"servers for tiers not given: {sorted(unknown)}")

    async def _spec(
        self, load: LoadOptions, placement: Placement, folder: Path, empty: set[TierName]
    ) -> Spec:
        """``empty``: tiers that hold nothing yet. Workers do not read those: what such a tier
        holds of a document during the run is only what this run wrote of an id it met before,
        and the owner compares those again itself (``Writer``). On the H200 this took prepare
        from 210–245 to 175 CPU-s for 512k chunks (docs/benchmarks.md)."""
        lookups: dict[TierName, Lookup] = dict(self._servers)
        if self._cold is not None:
            lookups["cold"] = self._cold.local.lookup()
        hot = self._tiers.get("hot")
        if isinstance(hot, QdrantEdgeTier) and "hot" not in empty:  # workers read a copy of its hashes
            path = folder / "hot.lookup"
            await asyncio.to_thread(write_lookup, path, hot.shards.hashes())
            lookups["hot"] = ColdLookup(path)
        lookups = {name: lookup for name, lookup in lookups.items() if name not in empty}
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
        empty = {name for name, tier in self._tiers.items() if not await tier.count()}
        spec = await self._spec(load, placement, segments, empty)
        if self._cold is not None:
            await asyncio.to_thread(
                self._cold.local.bulk_begin, threads=min(8, os.cpu_count() or 1), kmeans=_gpu_kmeans()
            )
        units = plan_units(list(paths), load, int(self._options.unit_mb * 1024 * 1024))
        writer = Writer(
            self._tiers,
            report,
            commit_chunks=self._options.commit_chunks,
            on_batch=on_batch,
            collect=collect,
            read_by_workers={*spec.lookups, *empty},
            written_by_workers=self._servers.keys(),
        )
        try:
            # into empty tiers every chunk is embedded: the GPU actors load the model at once
            preload = empty == set(self._tiers)
            with _ray(self._options):
                batches = self._dataflow(units, spec, segments, preload)
                while True:
                    waited = time.perf_counter()
                    batch = await asyncio.to_thread(next, batches, None)
                    report.timed("wait", waited)  # the owner idle, waiting for the dataflow
                    if batch is None:
                        break
                    if cancel is not None and cancel.is_set():
                        report.cancelled = True
                        break
                    await writer.write(batch)
                    report.seconds = time.perf_counter() - started
        finally:
            await self._finish(writer, report, segments)
        if writer.redo and not report.cancelled:
            await self._redo(writer.redo, writer.withheld, load, placement, report, on_batch, collect)
        report.seconds = time.perf_counter() - started
        return report

    async def _finish(self, writer: Writer, report: IngestReport, segments: Path) -> None:
        """The last rows adopted and their tantivy commit queued; then the cold tier leaves bulk
        mode (FAISS built beside that commit) while the owner acknowledges each commit as it
        completes. When that last adoption or an earlier commit failed, the owner first
        acknowledges what was committed, then the tier leaves bulk mode and catches up."""
        ending: asyncio.Future[None] | None = None
        try:
            try:
                await writer.commit()
            except BaseException:
                await writer.finish()  # raises too, most likely: the first failure is chained
                raise
            ending = self._end_bulk()
            await writer.finish()  # nothing adopted since: no commit queued, the queued ones waited
        finally:
            try:
                if ending is None:
                    ending = self._end_bulk()
                if ending is not None:
                    await ending
            finally:
                if self._cold is not None:
                    for stage, seconds in self._cold.local.bulk_seconds.items():
                        report.stage_seconds[f"cold_{stage}"] = seconds
                    self._cold.local.bulk_seconds.clear()
                await asyncio.to_thread(_remove_strays, segments)

    def _end_bulk(self) -> asyncio.Future[None] | None:
        """The cold tier's ``bulk_end``, started in a thread."""
        if self._cold is None:
            return None
        return asyncio.ensure_future(asyncio.to_thread(self._cold.local.bulk_end))

    async def _redo(
        self,
        redo: Mapping[Key, str],
        withheld: Mapping[Key, DocResult],
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
        # a copy its row already wrote in full is found unchanged here: it was updated by this run
        results = [_as_written(r, withheld.get((r.tenant or "", r.id))) for r in again.results]
        report.add(results, collect)
        report.chunks_written += again.chunks_written
        report.chunks_embedded += again.chunks_embedded
        if on_batch is not None:
            done = on_batch(results, report)
            if done is not None:
                await done

    @functools.cached_property
    def _actor_embedder(self) -> Callable[[], PassEmbedder]:
        """What the embedding actors load: the model's passes alone where they start faster
        (``indexers.embed.passes``; its check loads the weights once more, so once a pipeline),
        else ``make_embedder``."""
        return self._embedder.passes_loader() or self._make_embedder

    @property
    def actors_load_passes(self) -> bool:
        return self._actor_embedder is not self._make_embedder

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

    def _dataflow(
        self, units: Sequence[Any], spec: Spec, segments: Path, preload: bool
    ) -> Iterator[dict[str, Any]]:
        import ray

        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True  # the last copy of a document id wins
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        ctx.op_resource_reservation_enabled = False  # prepare may take every free core
        gpus = self._options.gpus
        if gpus is None:
            gpus = int(ray.cluster_resources().get("GPU", 0))  # type: ignore[no-untyped-call]
        per_gpu = max(1, self._options.actors_per_gpu)
        actors = gpus * per_gpu or self._options.cpu_actors
        cores = int(ray.cluster_resources().get("CPU", 1))  # type: ignore[no-untyped-call]
        unit_bytes = int(self._options.unit_mb * 1024 * 1024)
        units = taper(list(units), unit_bytes * cores, self._options.taper)
        items = [{"unit": json.dumps(dataclasses.asdict(u))} for u in units]  # Arrow-friendly
        ds: Any = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        ds = ds.map_batches(prepare_units, fn_kwargs={"spec": spec}, batch_size=1, batch_format="numpy")
        # On a GPU, prepare runs as tasks on every core; on CPUs only, Ray fuses it into the
        # embedding actors (the model is the whole cost there, and nothing is copied between).
        threads = None if gpus else max(1, cores // actors)
        ds = ds.map_batches(
            EmbedActor,
            fn_constructor_kwargs={
                "make_embedder": self._actor_embedder,
                "threads": threads,
                "preload": preload and bool(gpus),  # a CPU actor prepares too: it loads on demand
            },
            batch_size=self._options.embed_units,
            batch_format="numpy",
            num_gpus=1 / per_gpu if gpus else 0,
            compute=ray.data.ActorPoolStrategy(size=actors),
        )
        # build tasks writing to a server at once: at most one per block the embedding stage emits
        writers = max(
            1, min(self._options.write_concurrency, len(items) // max(1, self._options.embed_units))
        )
        ds = ds.map_batches(
            build_segments,
            fn_kwargs={
                "folder": str(segments),
                "analyzer": self._analyzer,
                "hot_avg_len": self._hot_avg_len(),
                "servers": self._servers,
            },
            batch_size=1,
            batch_format="numpy",
            compute=ray.data.TaskPoolStrategy(size=writers) if self._servers else None,
        )
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy", prefetch_batches=4):
            yield dict(batch)


def _remove_strays(segments: Path) -> None:
    """Segments no row adopted (a failed run) and the hot tier's lookup copy."""
    for stray in [*segments.glob("*.segment*"), segments / "hot.lookup"]:
        stray.unlink(missing_ok=True)


def _as_written(result: DocResult, owner: DocResult | None) -> DocResult:
    """The redo's result, or how the owner found the copy when its row wrote it (the redo then
    finds nothing left to change)."""
    if result.status == "unchanged" and owner is not None and owner.status in ("created", "updated"):
        return DocResult(result.id, owner.status, result.chunks, result.tier, result.error, result.tenant)
    return result


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
