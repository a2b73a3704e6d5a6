"""The ingest flow, top to bottom: read + chunk → diff → embed → write → acknowledge.

Three stages run at once, joined by bounded queues (back-pressure: a slow embedder stalls
reading, so memory stays flat whatever the corpus size):

1. **plan**: pull documents from the iterator (worker thread) until a batch holds about
   ``batch_chunks`` chunks of text; compare their fingerprints with what the tiers hold and
   chunk only the documents that changed (``indexers.ingest.prepare``).
2. **embed**: chunks not stored unchanged are looked up in the embedding cache; the misses
   go to the embedder in one call (it sorts them by length into token-bounded batches).
3. **write**: upsert into the target tier, delete stale chunks (a changed document's
   leftovers, its copy in the other tier), then report the batch's documents as done.

Idempotent by content hash: a chunk whose text, title and metadata are unchanged in the tier
it belongs to is neither re-embedded nor re-written; a changed document's stale chunks are
deleted only after its new chunks are durable, so a document is never missing mid-update.
A batch that holds a document still in flight in an earlier batch waits for that batch to
be written before it compares, so two versions in one run never leave a stale chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from indexers.embed.cache import EmbeddingCache
from indexers.embed.embedder import AsyncEmbedder
from indexers.ingest.load import LoadFailure
from indexers.ingest.prepare import chunk_documents, diff, document_hash, unchanged, with_structure
from indexers.ingest.results import DocResult, IngestReport, OnBatch, Placement, Placer, place
from indexers.records import DOC_HASH, Chunk, Document, EmbeddedChunk, StoredChunk, TierName
from indexers.text.chunk import Chunker, rerank_sentences
from indexers.tiers.base import StoreTier, TierError
from indexers.tiers.disk import DiskFull, DiskGuard, disk_full

log = logging.getLogger(__name__)

Held = tuple[str, str | None]  # a stored chunk's content hash and its document's hash
Key = tuple[str, str]  # (tenant, document id)
T = TypeVar("T")
_CHARS_PER_CHUNK = 800  # batches are cut by text size before chunking (~200 tokens of English)


@dataclass(slots=True)
class _Batch:
    results: list[DocResult]
    keys: set[Key]
    to_embed: list[tuple[TierName, Chunk]]
    stale: list[tuple[TierName, str, str]]
    vectors: np.ndarray | None = None
    written: asyncio.Event = field(default_factory=asyncio.Event)


class StageFailed(TierError):
    """The embedder failed, or a batch's embedding or writing passed ``batch_timeout_s``: the
    run stops and nothing of the batch is acknowledged."""


class Pipeline:
    def __init__(
        self,
        *,
        embedder: AsyncEmbedder,
        chunker: Chunker,
        tiers: Mapping[TierName, StoreTier],
        hot_window_days: int = 365,
        today: Callable[[], dt.date] = dt.date.today,
        batch_chunks: int = 512,
        queue_batches: int = 2,
        cache: EmbeddingCache | None = None,
        guard: DiskGuard | None = None,
        batch_timeout_s: float = 600.0,
        sentences: bool = False,
    ) -> None:
        self._embedder = embedder
        self._sentences = sentences and cache is not None  # the rerank stage reads them from the cache
        self._batch_timeout_s = batch_timeout_s  # a hung engine fails the run instead of holding it
        self._guard = guard
        self._chunker = chunker
        self._tiers = tiers
        self._hot_window_days = hot_window_days
        self._today = today
        self._batch_chunks = batch_chunks
        self._queue_batches = queue_batches
        self._cache = cache

    async def ingest(
        self,
        documents: Iterable[Document | LoadFailure],
        *,
        placement: Placement | Placer = "auto",
        optimize: bool = False,
        on_batch: OnBatch | None = None,
        cancel: asyncio.Event | None = None,
        collect: bool = False,
    ) -> IngestReport:
        report = IngestReport()
        started = time.perf_counter()
        planned: asyncio.Queue[_Batch | None] = asyncio.Queue(self._queue_batches)
        embedded: asyncio.Queue[_Batch | None] = asyncio.Queue(self._queue_batches)
        in_flight: dict[Key, _Batch] = {}

        def drop(batch: _Batch) -> None:
            """Cancelled: the batch is neither embedded nor written (its documents stay pending)."""
            report.cancelled = True
            for key in batch.keys:
                if in_flight.get(key) is batch:
                    del in_flight[key]
            batch.written.set()

        async def write_stage() -> None:
            while (batch := await embedded.get()) is not None:
                if cancel is not None and cancel.is_set():
                    drop(batch)
                    continue
                began = time.perf_counter()
                await self._write(batch)
                report.timed("write", began)
                for key in batch.keys:
                    if in_flight.get(key) is batch:
                        del in_flight[key]
                batch.written.set()
                report.add(batch.results, collect)
                report.chunks_written += len(batch.to_embed)
                report.seconds = time.perf_counter() - started
                if on_batch is not None:
                    done = on_batch(batch.results, report)
                    if done is not None:
                        await done

        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(
                    self._plan_stage(iter(documents), placement, planned, in_flight, cancel, report)
                )
                tasks.create_task(self._embed_stage(planned, embedded, report, cancel))
                tasks.create_task(write_stage())
        except ExceptionGroup as group:  # one stage failed and the others were stopped: its error
            raise group.exceptions[0] from None
        if optimize and not report.cancelled:
            await asyncio.gather(*(tier.optimize() for tier in self._tiers.values()))
        report.seconds = time.perf_counter() - started
        return report

    # stage 1: read, chunk, compare ---------------------------------------------------------

    async def _plan_stage(
        self,
        documents: Iterator[Document | LoadFailure],
        placement: Placement | Placer,
        out: asyncio.Queue[_Batch | None],
        in_flight: dict[Key, _Batch],
        cancel: asyncio.Event | None,
        report: IngestReport,
    ) -> None:
        try:
            while True:
                if cancel is not None and cancel.is_set():
                    report.cancelled = True
                    break
                began = time.perf_counter()
                read = await asyncio.to_thread(self._read_batch, documents, placement)
                report.timed("read", began)
                if read is None:
                    break
                planned, failures = read
                keys = {(doc.tenant, doc.id) for doc, _, _ in planned}
                earlier = {id(b): b for k in keys if (b := in_flight.get(k)) is not None}
                await asyncio.gather(*(b.written.wait() for b in earlier.values()))
                began = time.perf_counter()
                try:  # what the tiers hold of these documents, read within the batch deadline
                    async with asyncio.timeout(self._batch_timeout_s):
                        batch = await self._diff(planned, failures)
                except TimeoutError:
                    raise StageFailed(
                        f"reading a batch's stored chunks took over {self._batch_timeout_s:g} s"
                    ) from None
                report.timed("diff", began)
                in_flight.update(dict.fromkeys(batch.keys, batch))
                await out.put(batch)
        except BaseException:
            _end(out)
            raise
        await out.put(None)

    def _read_batch(
        self, documents: Iterator[Document | LoadFailure], placement: Placement | Placer
    ) -> tuple[list[tuple[Document, TierName, str]], list[DocResult]] | None:
        """Read documents until they hold about ``batch_chunks`` chunks of text; place and
        fingerprint each. Runs in a worker thread."""
        latest: dict[Key, Document] = {}
        failures: list[DocResult] = []
        size, read = 0, 0
        for item in documents:
            read += 1
            if isinstance(item, LoadFailure):
                failures.append(DocResult(item.source, "failed", error=item.reason))
            else:
                doc = with_structure(item)
                latest.pop((doc.tenant, doc.id), None)  # the last copy of an id wins
                latest[(doc.tenant, doc.id)] = doc
                size += len(doc.text) + len(doc.title or "")
            if size >= _CHARS_PER_CHUNK * self._batch_chunks or read >= 4 * self._batch_chunks:
                break
        if read == 0:
            return None
        today = self._today()
        planned = []
        for doc in latest.values():
            tier = place(doc, placement, self._hot_window_days, today)
            planned.append((doc, tier, document_hash(doc, tier, self._chunker)))
        return planned, failures

    async def _diff(self, planned: list[tuple[Document, TierName, str]], failures: list[DocResult]) -> _Batch:
        """Unchanged documents (same fingerprint on every stored chunk) are not even chunked;
        the others are chunked together (one tokenizer call) and compared chunk by chunk."""
        existing = await self._existing([doc for doc, _, _ in planned])
        batch = _Batch(results=list(failures), keys=set(), to_embed=[], stale=[])
        todo = [
            (doc, h)
            for doc, tier, h in planned
            if not unchanged(existing.get((doc.tenant, doc.id), {}), tier, h)
        ]
        chunked = iter(await asyncio.to_thread(chunk_documents, self._chunker, todo))
        for doc, tier, doc_hash in planned:  # results in the documents' order
            stored = existing.get((doc.tenant, doc.id), {})
            batch.keys.add((doc.tenant, doc.id))
            if unchanged(stored, tier, doc_hash):
                batch.results.append(DocResult(doc.id, "unchanged", len(stored), tier, tenant=doc.tenant))
                continue
            chunks = next(chunked)
            found = diff(tier, chunks, stored)
            batch.to_embed.extend((tier, c) for c in found.fresh)
            batch.stale.extend((t, doc.tenant, cid) for t, cid in found.stale)
            batch.results.append(DocResult(doc.id, found.status, len(chunks), tier, tenant=doc.tenant))
        return batch

    async def _existing(self, docs: Sequence[Document]) -> dict[Key, dict[tuple[TierName, str], Held]]:
        """(tenant, doc id) → {(tier, chunk id): (content hash, document hash)} over every tier."""
        out: dict[Key, dict[tuple[TierName, str], Held]] = {}
        by_tenant: dict[str, list[str]] = {}
        for doc in docs:
            by_tenant.setdefault(doc.tenant, []).append(doc.id)
        for tenant, ids in by_tenant.items():
            for name, tier in self._tiers.items():
                stored: list[StoredChunk] = await tier.fetch(tenant, ids)
                for chunk in stored:
                    held = (chunk.content_hash, chunk.metadata.get(DOC_HASH))
                    out.setdefault((tenant, chunk.doc_id), {})[(name, chunk.chunk_id)] = held
        return out

    # stage 2: embed ---------------------------------------------------------------------------

    async def _embed_stage(
        self,
        source: asyncio.Queue[_Batch | None],
        out: asyncio.Queue[_Batch | None],
        report: IngestReport,
        cancel: asyncio.Event | None,
    ) -> None:
        """Embed each batch; once cancelled, pass batches on unembedded (the write stage drops them).

        A cancel also stops the batch being embedded: one batch is hundreds of chunks, a minute
        of a busy CPU, and a job must not read ``running`` all that time after it was cancelled."""
        try:
            while (batch := await source.get()) is not None:
                if batch.to_embed and not (cancel is not None and cancel.is_set()):
                    began = time.perf_counter()
                    texts = [c.embed_text for _, c in batch.to_embed]
                    embedded = await _unless_cancelled(self._embed_batch(texts), cancel)
                    if embedded is not None:
                        batch.vectors, cached = embedded
                        report.timed("embed", began)
                        report.chunks_cached += cached
                        report.chunks_embedded += len(texts) - cached
                    if self._sentences and embedded is not None:
                        await _unless_cancelled(self._embed_sentences(batch, report), cancel)
                await out.put(batch)
        except BaseException:
            _end(out)
            raise
        await out.put(None)

    async def _embed_sentences(self, batch: _Batch, report: IngestReport) -> None:
        """The batch's chunks' sentences into the cache, for the rerank stage
        (``rag_router.search.rerank.SentenceReranker``), which embeds them itself when they are
        missing: a failure here costs a first query time, never the ingest."""
        began = time.perf_counter()
        texts = list(dict.fromkeys(s for _, c in batch.to_embed for s in rerank_sentences(c.text)))
        try:
            async with asyncio.timeout(self._batch_timeout_s):
                await self._embed(texts)
        except Exception as exc:
            log.warning("sentence vectors of a batch not stored (%s): the first query embeds them", exc)
        report.timed("sentences", began)

    async def _embed_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """One batch's vectors within ``batch_timeout_s``; a failing embedder fails the run (503)."""
        try:
            async with asyncio.timeout(self._batch_timeout_s):
                return await self._embed(texts)
        except TimeoutError:
            raise StageFailed(f"embedding a batch took over {self._batch_timeout_s:g} s") from None
        except Exception as exc:
            raise StageFailed(f"the embedder failed: {type(exc).__name__}: {exc}") from exc

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors, from the cache where it has them (also used by ``retier``)."""
        return (await self._embed(texts))[0]

    async def _embed(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        cache = self._cache
        hits = await asyncio.to_thread(cache.get_many, texts) if cache is not None else {}
        missing = [i for i in range(len(texts)) if i not in hits]
        fresh = await self._embedder.embed_bulk([texts[i] for i in missing]) if missing else None
        dim = self._embedder.sync.dim
        vectors = np.zeros((len(texts), dim), dtype=np.float32)
        for i, vector in hits.items():
            vectors[i] = vector
        if fresh is not None:
            vectors[missing] = fresh
            if cache is not None:
                await asyncio.to_thread(cache.put_many, [texts[i] for i in missing], fresh)
        return vectors, len(hits)

    # stage 3: write ---------------------------------------------------------------------------

    async def _write(self, batch: _Batch) -> None:
        """Write one batch; nothing of it is acknowledged unless all of it is written."""
        if self._guard is not None:
            self._guard.check()  # under the floor: refuse before a memory-mapped write can fault
        try:
            async with asyncio.timeout(self._batch_timeout_s):
                await self._write_tiers(batch)
        except TimeoutError:
            raise StageFailed(f"writing a batch took over {self._batch_timeout_s:g} s") from None
        except DiskFull:
            raise
        except Exception as exc:
            if disk_full(exc):
                raise DiskFull(f"the data dir's file system is full: {exc}") from exc
            raise

    async def _write_tiers(self, batch: _Batch) -> None:
        if batch.to_embed:
            assert batch.vectors is not None
            by_tier: dict[TierName, list[EmbeddedChunk]] = {}
            for (tier, chunk), vector in zip(batch.to_embed, batch.vectors, strict=True):
                by_tier.setdefault(tier, []).append(EmbeddedChunk(chunk, vector))
            await asyncio.gather(*(self._tiers[t].upsert(chunks) for t, chunks in by_tier.items()))
        groups: dict[tuple[TierName, str], list[str]] = {}
        for tier, tenant, chunk_id in batch.stale:
            groups.setdefault((tier, tenant), []).append(chunk_id)
        for (tier, tenant), ids in groups.items():
            await self._tiers[tier].delete(tenant, ids)


async def _unless_cancelled(work: Coroutine[Any, Any, T], cancel: asyncio.Event | None) -> T | None:
    """``work``'s result, or None as soon as ``cancel`` is set (``work`` is then cancelled; an
    embedding already running in its worker thread finishes there, unused)."""
    if cancel is None:
        return await work
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not task.done():
            task.cancel()
    if not task.cancelled() and task.done():
        return task.result()
    await asyncio.wait({task})  # let it take the cancel (its thread's result is dropped)
    if not task.cancelled():
        task.exception()  # it ended before the cancel landed: whatever it raised is moot now
    return None


def _end(queue: asyncio.Queue[_Batch | None]) -> None:
    """A stage stopped by an error or a cancel: tell the next stage if there is room. Waiting for
    room could wait for ever: the next stage may be the one that failed (the task group then
    stops it anyway)."""
    with contextlib.suppress(asyncio.QueueFull):
        queue.put_nowait(None)
