"""The Ray engine: the ingest flow spread over every core and GPU of a Ray cluster (Ray Data).

    units ─ prepare (CPU tasks) ─ embed (actor pool: one per GPU, or CPU actors) ─ build (CPU tasks) ─ owner

* **units** (``indexers.ingest.ray.units``): the input cut into pieces of about ``unit_mb``
  (line-aligned byte ranges of a JSONL file, groups of one-document files); a gzip file is one unit.
* **prepare** (``prepare_units``): load, fingerprint and place each document; read what the tiers
  hold of it where a worker can (the embedded cold tier's SQLite, read-only; a server through its
  own client; nothing from a tier that was empty when the run began); skip unchanged
  documents without chunking them; chunk and compare the others (``indexers.ingest.prepare``, the
  in-process pipeline's own functions); tokenize the chunks to embed.
* **embed** (``EmbedActor``): token ids → vectors; large length-sorted batches; fp16 on a GPU.
* **build** (``build_segments``): the embedded cold tier's rows written into a segment file per
  block; a server tier's chunks (Qdrant, Elasticsearch) written to the server from here, in
  acknowledged batches through the tier's own adapter (its retries and 429 backoff), with as
  many build tasks at once as ``RayOptions.write_concurrency`` allows.
* **owner** (this process, ``RayPipeline``): adopts the segments (up to eight in one SQLite
  transaction, each all or nothing), upserts the embedded hot tier's chunks, deletes stale
  chunks, and acknowledges documents once tantivy has committed them (every ``commit_chunks``);
  FAISS is brought up to date once at the end.

A document is acknowledged only when durable, so after a kill (driver or worker) a re-run finds
acknowledged documents unchanged and finishes the rest; an unadopted segment is deleted.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import itertools
import pickle
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from indexers.embed.base import PassEmbedder
from indexers.embed.tokens import Tokenizers
from indexers.ingest.load import LoadFailure, LoadOptions
from indexers.ingest.prepare import (
    Diff,
    chunk_documents_ids,
    diff,
    document_hash,
    unchanged,
    with_structure,
)
from indexers.ingest.ray.tiers import Lookup, Server
from indexers.ingest.ray.units import Unit, read_unit_sourced
from indexers.ingest.results import DocResult, Placement, place, repeat_kept
from indexers.records import Chunk, Document, EmbeddedChunk, TierName, content_hash
from indexers.text.chunk import Chunker
from indexers.text.lexical import Analyzer
from indexers.tiers.cold_segment import write_segment
from indexers.tiers.edge_shard import point_parts
from indexers.workers import lower_priority

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Spec:
    """Everything a prepare task needs (pickled once per task)."""

    options: LoadOptions
    tokenizers: Tokenizers
    max_tokens: int
    overlap_tokens: int
    placement: Placement
    hot_window_days: int
    today: dt.date
    lookups: Mapping[TierName, Lookup]  # tiers a worker can read

    def chunker(self) -> Chunker:
        """The run's chunker; with a word memo it also gives each chunk's ids (``_prepare``)."""
        words = self.tokenizers.words
        return Chunker(
            self.tokenizers.count,
            max_tokens=self.max_tokens,
            overlap_tokens=self.overlap_tokens,
            token_ids=words.ids if words is not None else None,
        )


# Between the stages a row is a few opaque columns, so that each process unpickles only what it
# uses: "meta" (results, stale chunks, checks: the owner's) and "chunks" are pickled bytes that
# the embedding actor passes on untouched; it reads only "ids" (one flat int32 array a row) and
# "lengths", and adds "vectors" (float32, one row of vectors a chunk). Each stage adds its busy
# seconds ("<stage>_s") and the wall-clock time it finished the row ("<stage>_at").


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a stage runs. A stage allocates millions of objects
    (words, chunks, rows) and frees them by reference counting; meanwhile the collector's full
    passes walk everything the process holds (the tokenizer, the model): over a quarter of a prepare
    task's time. A Ray worker runs one task at a time, so this touches no one else's work."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# How far the CPU tasks (prepare, build) step back: on a GPU machine they take every core, and
# the work that must not wait for them is elsewhere: the embedding actors loading their model
# (imports, CUDA) and feeding the GPU. Ray starts its workers, actors included, at nice 15 (the
# driver, where the owner adopts, stays at 0); a task's thread goes to nice 19, the floor, which
# gives an actor ~2.4 times its share of a core both want, and the task all of any core left
# idle (Linux; elsewhere a no-op). Where prepare runs inside an embedding actor (CPU only: Ray
# fuses them) nothing steps back: the model is the work there.
BACKGROUND_NICE = 10
_thread = threading.local()  # .stepped_back: this thread was lowered (a new thread starts anew)
_in_actor = False  # this process holds an EmbedActor


def step_back() -> None:
    """Lower the calling thread's priority by ``BACKGROUND_NICE`` (capped at nice 19), once per
    thread, unless this process is an embedding actor."""
    if _in_actor or getattr(_thread, "stepped_back", False):
        return
    _thread.stepped_back = True
    lower_priority(BACKGROUND_NICE)


def prepare_units(batch: dict[str, Any], spec: Spec) -> dict[str, Any]:
    """Ray Data batch of units → one row per unit: results, chunks to embed, their token ids."""
    step_back()
    with collector_paused():
        return _prepare_batch(batch, spec)


def _prepare_batch(batch: dict[str, Any], spec: Spec) -> dict[str, Any]:
    out: dict[str, list[Any]] = {
        k: [] for k in ("meta", "chunks", "ids", "lengths", "prepare_s", "prepare_at")
    }
    for raw in batch["unit"]:
        began = time.perf_counter()
        row = _prepare(Unit.of(raw), spec)
        ids: list[list[int]] = row["ids"]
        meta = {k: row[k] for k in ("results", "stale", "check", "sources", "repeats")}
        out["meta"].append(pickle.dumps({**meta, "unit": raw}, protocol=5))
        out["chunks"].append(pickle.dumps(row["chunks"], protocol=5))
        out["ids"].append(np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int32))
        out["lengths"].append(np.asarray([len(i) for i in ids], dtype=np.int32))
        out["prepare_s"].append(time.perf_counter() - began)
        out["prepare_at"].append(time.time())
    return {k: _objects(v) for k, v in out.items()}


def _objects(values: list[Any]) -> np.ndarray[Any, Any]:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _prepare(unit: Unit, spec: Spec) -> Row:
    latest: dict[tuple[str, str], tuple[Document, str]] = {}  # each id's last copy, where read
    results: list[DocResult] = []
    repeats: list[tuple[str, str]] = []  # (source, message): copies read again in this unit
    for source, item in read_unit_sourced(unit, spec.options):
        if isinstance(item, LoadFailure):
            results.append(DocResult(item.source, "failed", error=item.reason))
            continue
        doc = with_structure(item)
        if latest.pop((doc.tenant, doc.id), None) is not None and not _hashed(doc):
            repeats.append((source, repeat_kept(doc.id)))
        latest[(doc.tenant, doc.id)] = (doc, source)
    chunker = spec.chunker()
    planned = []
    # where each document was read ("" for an id that is its content's hash: a repeat of it is
    # the same document), for the owner to name a repeat across units (``Writer._row``)
    sources = [("" if _hashed(doc) else source) for doc, source in latest.values()]
    for doc, _ in latest.values():
        tier = place(doc, spec.placement, spec.hot_window_days, spec.today)
        planned.append((doc, tier, document_hash(doc, tier, chunker)))
    stored = _stored(planned, spec.lookups)
    todo = [(d, h) for d, t, h in planned if not unchanged(stored.get((d.tenant, d.id), {}), t, h)]
    chunked = iter(chunk_documents_ids(chunker, todo))
    fresh: list[tuple[TierName, Chunk]] = []
    fresh_ids: list[list[int] | None] = []  # their texts' ids, where the chunker knew them
    stale: list[tuple[TierName, str, str]] = []
    # (tenant, doc id, tier, [(chunk id, content hash)]): for the owner, who compares what no
    # worker read (or what changed since a worker read it) with what the document has now
    check: list[tuple[str, str, TierName, list[tuple[str, str]]]] = []
    for doc, tier, doc_hash in planned:
        held = stored.get((doc.tenant, doc.id), {})
        if unchanged(held, tier, doc_hash):
            results.append(DocResult(doc.id, "unchanged", len(held), tier, tenant=doc.tenant))
            check.append((doc.tenant, doc.id, tier, []))
            continue
        with_ids = next(chunked)
        chunks = [c for c, _ in with_ids]
        found: Diff = diff(tier, chunks, held)
        fresh += [(tier, c) for c in found.fresh]
        known = {id(c): ids for c, ids in with_ids}
        fresh_ids += [known[id(c)] for c in found.fresh]
        stale += [(t, doc.tenant, cid) for t, cid in found.stale]
        results.append(DocResult(doc.id, found.status, len(chunks), tier, tenant=doc.tenant))
        check.append((doc.tenant, doc.id, tier, [(c.chunk_id, c.content_hash) for c in chunks]))
    ids = spec.tokenizers.chunk_passages([c for _, c in fresh], fresh_ids)
    return {
        "results": results,
        "chunks": fresh,
        "ids": ids,
        "stale": stale,
        "check": check,
        "sources": sources,
        "repeats": repeats,
    }


def _hashed(doc: Document) -> bool:
    """Whether the id is the hash of the title and text (none was given): a repeat of such an
    id is the same text, let through as in process (``load.SeenIds``). The length check first:
    most ids are not 32 characters, and hashing the text costs."""
    return len(doc.id) == 32 and doc.id == content_hash(doc.title or "", doc.text)


def _stored(
    planned: Sequence[tuple[Document, TierName, str]], lookups: Mapping[TierName, Lookup]
) -> dict[tuple[str, str], dict[tuple[TierName, str], tuple[str, str | None]]]:
    out: dict[tuple[str, str], dict[tuple[TierName, str], tuple[str, str | None]]] = {}
    by_tenant: dict[str, list[str]] = {}
    for doc, _, _ in planned:
        by_tenant.setdefault(doc.tenant, []).append(doc.id)
    for tenant, ids in by_tenant.items():
        for name, lookup in lookups.items():
            for doc_id, chunks in lookup.hashes(tenant, ids).items():
                held = out.setdefault((tenant, doc_id), {})
                held.update({(name, cid): h for cid, h in chunks.items()})
    return out


class EmbedActor:
    """One per GPU (or a few on CPU): token ids → vectors, for every row of a batch at once."""

    def __init__(
        self, make_embedder: Callable[[], PassEmbedder], threads: int | None = None, preload: bool = False
    ) -> None:
        global _in_actor
        _in_actor = True  # prepare fused into this actor (CPU only) does not step back
        self._make = make_embedder
        self._threads = threads
        self._embedder: PassEmbedder | None = None
        # wall clock (0: not yet): the actor started (its process up, its arguments unpickled),
        # torch imported, the model loaded. Reported as spans: where an actor's start goes.
        self._started_at, self._torch_at, self._ready_at = time.time(), 0.0, 0.0
        # ``preload``: the model (torch, CUDA, weights: ~25 s on the H200 machine) loads beside
        # the first units' preparation instead of on the first chunk to embed. The owner asks
        # for it when everything will be embedded (a load into empty tiers); a run over stored
        # documents may embed nothing, and then loading the model only slows it down.
        self._preload = preload
        self._loading = ThreadPoolExecutor(1).submit(self._load) if preload else None

    def _load(self) -> PassEmbedder:
        if self._threads or self._preload:  # a GPU actor's import of torch, timed
            import torch

            self._torch_at = time.time()
            if self._threads:  # Ray sets OMP_NUM_THREADS=1 in workers: a CPU actor takes its cores
                torch.set_num_threads(self._threads)
        embedder = self._make()
        self._ready_at = time.time()
        return embedder

    @property
    def embedder(self) -> PassEmbedder:
        if self._embedder is None:
            self._embedder = self._loading.result() if self._loading is not None else self._load()
        return self._embedder

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        with collector_paused():
            return self._embed(batch)

    def _embed(self, batch: dict[str, Any]) -> dict[str, Any]:
        began, arrived = time.perf_counter(), time.time()
        rows: list[list[np.ndarray[Any, Any]]] = []
        for flat, lengths in zip(batch["ids"], batch["lengths"], strict=True):
            ends = np.cumsum(lengths)
            rows.append([flat[e - n : e] for e, n in zip(ends, lengths, strict=True)])
        every = [ids for row in rows for ids in row]
        vectors = self.embedder.embed_ids(every) if every else None  # type: ignore[arg-type]
        out, at = [], 0
        for row in rows:
            out.append(vectors[at : at + len(row)] if vectors is not None else np.zeros((0, 1), np.float32))
            at += len(row)
        share = (time.perf_counter() - began) / max(len(rows), 1)
        keep = {k: v for k, v in batch.items() if k not in ("ids", "lengths")}
        return {
            **keep,
            "vectors": _objects(out),
            "embed_s": np.full(len(rows), share),
            "embed_at": np.full(len(rows), time.time()),
            # when the batch reached the actor; when the actor started, had torch, had its model
            "arrived_at": np.full(len(rows), arrived),
            "actor_at": np.full(len(rows), self._started_at),
            "torch_at": np.full(len(rows), self._torch_at),
            "model_at": np.full(len(rows), self._ready_at),
        }


def build_segments(
    batch: dict[str, Any],
    folder: str,
    analyzer: Analyzer,
    hot_avg_len: float | None,
    servers: Mapping[TierName, Server] | None = None,
) -> dict[str, Any]:
    """Each row's chunks where they go: a server tier's written to the server from here; the
    embedded cold tier's into one segment file; the embedded hot tier's become point parts
    (``hot_avg_len``: its BM25 length) or stay chunks, for the owner to upsert."""
    step_back()
    with collector_paused():
        return _build_batch(batch, folder, analyzer, hot_avg_len, servers or {})


def _build_batch(
    batch: dict[str, Any],
    folder: str,
    analyzer: Analyzer,
    hot_avg_len: float | None,
    servers: Mapping[TierName, Server],
) -> dict[str, Any]:
    segments, rest, served, busy = [], [], [], []
    for blob, vectors in zip(batch["chunks"], batch["vectors"], strict=True):
        began = time.perf_counter()
        chunks: list[tuple[TierName, Chunk]] = pickle.loads(blob)
        embedded = [(t, EmbeddedChunk(c, v)) for (t, c), v in zip(chunks, vectors, strict=True)]
        n = 0
        for name, server in servers.items():
            mine = [e for t, e in embedded if t == name]
            server.upsert(mine)
            n += len(mine)
        cold = [e for t, e in embedded if t == "cold" and t not in servers]
        hot = [
            (t, e, point_parts(e, analyzer, hot_avg_len) if hot_avg_len is not None else None)
            for t, e in embedded
            if t != "cold" and t not in servers
        ]
        path = ""
        if cold:
            path = str(Path(folder) / f"{uuid.uuid4().hex}.segment")
            write_segment(Path(path), cold, analyzer)
        segments.append(path)
        rest.append(pickle.dumps(hot, protocol=5))
        served.append(n)
        busy.append((len(cold), time.perf_counter() - began))
    keep = {k: v for k, v in batch.items() if k not in ("chunks", "vectors")}
    return {
        **keep,
        "segment": _objects(segments),
        "segment_rows": np.asarray([n for n, _ in busy], dtype=np.int64),
        "served_rows": np.asarray(served, dtype=np.int64),
        "hot": _objects(rest),
        "build_s": np.asarray([b for _, b in busy]),
        "build_at": np.full(len(busy), time.time()),
    }
