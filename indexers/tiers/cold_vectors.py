"""The cold tier's vector index: FAISS, exact below a size threshold and IVF-SQ8 above it."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from readerwriterlock import rwlock

from indexers.records import Vector
from indexers.tiers.cold_store import write_atomic

KMeans = Callable[[Vector, int], Vector]
# Vectors the scalar quantizer learns its ranges from (per dimension, of the residuals to the
# lists' centroids) when the lists were trained elsewhere: FAISS assigns each training vector to
# its list on the CPU first, which over 256 vectors a list was most of the index build at 2M
# chunks. 65,536 measured the same recall as the whole sample (docs/benchmarks.md).
ENCODER_SAMPLE = 65_536
# The IVF lists are retrained once the store holds this many times the vectors they were trained
# for: its lists ~ 4·sqrt(N), so by then the trained ones are half as many as the store wants, each
# twice as long, and a search at the same nprobe scans twice the vectors (as found at 1M chunks).
REGROW = 4
# nprobe is chosen at build time for this recall@10 against exact search on query-like probes
# (``probes``): above the 0.95 questions should reach, for the probes' own noise (256 of them).
# Over 20k sentences SciFact's claims then reached 0.959 (0.95 at the probes' 0.95).
RECALL_TARGET = 0.97
CALIBRATION_QUERIES = 256
# ...and never fewer lists than nlist // FLOOR, for queries unlike any stored text: probes from
# other clusters than the stored vectors' needed 11 lists of 252 where the calibration chose 8
# (tests/contract: test_ann_recall_after_reopen); the old default, 0.95 at 1M chunks.
FLOOR = 16
# Threads one IVF search spreads its lists over (FAISS's parallel_mode 1), from each reader thread
# of the tier (``threaded.READERS``): one client's search uses several cores, many clients' use
# them all without more threads than cores. 1 on a 2-core machine: each search in its own thread.
SEARCH_THREADS = max(1, (os.cpu_count() or 1) // 4)


class VectorIndex:
    """FAISS over SQLite rows; the file is a cache that ``catch_up`` repairs."""

    def __init__(self, path: Path, dim: int, ivf_threshold: int) -> None:
        self.path = path
        self.dim = dim
        self.ivf_threshold = ivf_threshold
        self.watermark_file = path.with_suffix(".watermark")
        # searches share it (FAISS searches concurrently); a write takes it alone
        self.lock = rwlock.RWLockWrite()
        self.index: Any = None
        self.dirty = False

    def load(self) -> int:
        """Open the saved index; returns its watermark (0 when rebuilt from scratch)."""
        if self.path.exists() and self.watermark_file.exists():
            self.index = _parallel(faiss.read_index(str(self.path)))
            return int(self.watermark_file.read_text())
        self.index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        return 0

    def wants_rebuild(self, n: int, regrow: bool = True) -> bool:
        """Whether ``n`` vectors want another kind of index, or (``regrow``) IVF lists trained
        anew (``REGROW``)."""
        is_ivf = self.index is not None and not isinstance(self.index, faiss.IndexIDMap2)
        if (n >= self.ivf_threshold) != is_ivf:
            return True
        if not (regrow and is_ivf):
            return False
        return bool(faiss.extract_index_ivf(self.index).nlist * math.sqrt(REGROW) <= lists_for(n))

    def build(
        self, seqs: np.ndarray[Any, Any], vectors: Vector, kmeans: KMeans | None = None
    ) -> dict[str, float]:
        """A fresh index of these vectors; ``kmeans`` (sample, lists) → centroids trains the IVF
        lists elsewhere (a GPU) instead of FAISS's k-means on the CPU. Returns the seconds its
        steps took: "train" (sampling, k-means, the quantizer; "kmeans" alone too) and "add"."""
        n = len(seqs)
        began = time.perf_counter()
        steps: dict[str, float] = {}
        if n < self.ivf_threshold:
            index: Any = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        else:
            nlist = lists_for(n)
            quantizer = faiss.IndexFlatIP(self.dim)
            index = faiss.IndexIVFScalarQuantizer(
                quantizer, self.dim, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
            )
            sample = vectors[np.random.default_rng(0).permutation(n)[: 256 * nlist]]
            assign = getattr(kmeans, "assign", None)  # each vector's list, found where k-means ran
            if kmeans is not None:  # a trained quantizer of nlist points: train() skips k-means
                lists_began = time.perf_counter()
                centroids = np.ascontiguousarray(kmeans(sample, nlist), dtype=np.float32)
                steps["kmeans"] = time.perf_counter() - lists_began
                quantizer.add(centroids)
                self._train_encoder(index, sample[:ENCODER_SAMPLE], centroids, assign)  # shuffled
            else:
                index.train(sample)
            steps["train"] = time.perf_counter() - began
        began = time.perf_counter()
        _add(index, seqs, vectors, getattr(kmeans, "assign", None))
        steps["add"] = time.perf_counter() - began
        if n >= self.ivf_threshold:
            began = time.perf_counter()
            index.nprobe = calibrate(index, seqs, vectors)
            steps["calibrate"] = time.perf_counter() - began
        with self.lock.gen_wlock():
            self.index = _parallel(index)
            self.dirty = True
        return steps

    @staticmethod
    def _train_encoder(
        index: Any, part: Vector, centroids: Vector, assign: Callable[[Vector, Vector], Any] | None
    ) -> None:
        """The scalar quantizer's ranges, from ``part``'s residuals to their lists' centroids:
        with the lists found where k-means ran (``assign``) instead of by FAISS on the CPU
        (``IndexIVF.train`` would, the quantizer already trained). The same ranges either way."""
        if assign is None:
            index.train(part)
            return
        lists = np.ascontiguousarray(assign(part, centroids), dtype=np.int64)
        x = np.ascontiguousarray(part - centroids[lists] if index.by_residual else part, dtype=np.float32)
        index.train_encoder(len(x), faiss.swig_ptr(x), faiss.swig_ptr(lists))
        index.is_trained = True

    def apply(
        self, seqs: Sequence[int], vectors: Vector, deleted: Sequence[int], kmeans: KMeans | None = None
    ) -> None:
        """Replace ``seqs``' vectors and drop ``deleted``; ``kmeans`` may put them in their lists
        (its ``assign``, on a GPU say: a bulk load's catch-up brings millions)."""
        with self.lock.gen_wlock():
            gone = np.asarray(list(seqs) + list(deleted), dtype=np.int64)
            if len(gone):
                self.index.remove_ids(gone)
            if len(seqs):
                _add(self.index, np.asarray(seqs, dtype=np.int64), vectors, getattr(kmeans, "assign", None))
            self.dirty = True

    def search(
        self, vector: Vector, k: int, allowed: np.ndarray[Any, Any] | None, exact: bool
    ) -> list[tuple[int, float]]:
        with self.lock.gen_rlock():
            if self.index.ntotal == 0 or (allowed is not None and len(allowed) == 0):
                return []
            faiss.omp_set_num_threads(SEARCH_THREADS)  # this thread's teams (an OpenMP setting per thread)
            # The selector must outlive the search: params only hold a raw pointer to it.
            selector = faiss.IDSelectorBatch(allowed) if allowed is not None else None
            params = self._params(selector, exact)
            scores, ids = self.index.search(vector.reshape(1, -1), k, params=params)
        return [(int(i), float(s)) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]

    def _params(self, selector: Any, exact: bool) -> Any:
        if isinstance(self.index, faiss.IndexIDMap2):
            if selector is None:
                return None
            params = faiss.SearchParameters()
        else:
            params = faiss.SearchParametersIVF()
            params.nprobe = self.index.nlist if exact else self.index.nprobe
        if selector is not None:
            params.sel = selector
        return params

    def save(self, version: int) -> None:
        """Write the index beside searches (a 10M index takes seconds); callers hold the store's
        write lock, so no change or other save runs meanwhile."""
        with self.lock.gen_rlock():
            if not self.dirty:
                return
            tmp = self.path.with_suffix(".tmp")
            faiss.write_index(self.index, str(tmp))
            tmp.replace(self.path)
            self.dirty = False
        write_atomic(self.watermark_file, str(version))


def _parallel(index: Any) -> Any:
    """An IVF index that splits one query's lists over threads (FAISS's default splits a batch
    by query: one query at a time, as the service asks, ran on one core)."""
    if not isinstance(index, faiss.IndexIDMap2):
        faiss.extract_index_ivf(index).parallel_mode = 1
    return index


def lists_for(n: int) -> int:
    """IVF lists for ``n`` vectors: 4·sqrt(n), FAISS's rule of thumb."""
    return int(4 * math.sqrt(n))


def _add(index: Any, seqs: np.ndarray[Any, Any], vectors: Vector, assign: Any) -> None:
    """Add under ``seqs``; an IVF's lists found by ``assign`` (vectors, centroids) when given, so
    FAISS only encodes (its own assignment on the CPU was most of adding 500k vectors)."""
    ivf = None if isinstance(index, faiss.IndexIDMap2) else faiss.extract_index_ivf(index)
    if ivf is None or assign is None or not len(seqs):
        if len(seqs):
            index.add_with_ids(vectors, seqs)
        return
    centroids = ivf.quantizer.reconstruct_n(0, ivf.nlist)
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    ids = np.ascontiguousarray(seqs, dtype=np.int64)
    lists = np.ascontiguousarray(assign(x, centroids), dtype=np.int64)
    ivf.add_core(len(x), faiss.swig_ptr(x), faiss.swig_ptr(ids), faiss.swig_ptr(lists))


def calibrate(
    index: Any,
    seqs: np.ndarray[Any, Any],
    vectors: Vector,
    target: float | None = None,
    queries: int = CALIBRATION_QUERIES,
    k: int = 10,
) -> int:
    """nprobe for ``index``: the smallest (a power of two, or halfway to the next) whose
    recall@k against exact search reaches ``target`` (``RECALL_TARGET``) on probes made of the
    stored vectors, and never fewer than ``nlist // 16`` lists (``FLOOR``)."""
    target = RECALL_TARGET if target is None else target
    ivf = faiss.extract_index_ivf(index)
    q = probes(vectors, queries)
    truth = _exact_top(q, vectors, seqs, k)
    params = faiss.SearchParametersIVF()

    def recall(nprobe: int) -> float:
        params.nprobe = nprobe
        _, found = index.search(q, k, params=params)
        return sum(
            len({*want.tolist()} & {*got.tolist()}) for want, got in zip(truth, found, strict=True)
        ) / (k * len(q))

    low, nprobe = 0, 1
    while nprobe < ivf.nlist and recall(nprobe) < target:
        low, nprobe = nprobe, nprobe * 2
    nprobe = min(nprobe, ivf.nlist)
    middle = (low + nprobe) // 2
    if low and middle > low and recall(middle) >= target:
        nprobe = middle
    return max(nprobe, ivf.nlist // FLOOR, 1)


def probes(vectors: Vector, n: int, seed: int = 1) -> Vector:
    """Query-like vectors: the normalised sum of two stored vectors each. Stored vectors as
    queries sit by their own list's centroid and asked for fewer lists than questions do
    (SciFact's claims over 20k sentences: 73 lists of 565 where the claims needed 94 for 0.95;
    these probes asked for 94)."""
    rng = np.random.default_rng(seed)
    pair = vectors[rng.integers(0, len(vectors), n)] + vectors[rng.integers(0, len(vectors), n)]
    norms = np.linalg.norm(pair, axis=1, keepdims=True)
    return np.ascontiguousarray(pair / np.maximum(norms, 1e-12), dtype=np.float32)


def _exact_top(q: Vector, vectors: Vector, seqs: np.ndarray[Any, Any], k: int, rows: int = 262_144) -> Any:
    """The seqs of each query's ``k`` largest inner products over every vector."""
    blocks = ((seqs[at : at + rows], vectors[at : at + rows]) for at in range(0, len(vectors), rows))
    return exact_top(q, blocks, k)


def exact_top(q: Vector, blocks: Iterable[tuple[np.ndarray[Any, Any], Vector]], k: int) -> Any:
    """The ids of each query's ``k`` largest inner products over every (ids, vectors) block, a
    block at a time (bench/scale_measure streams 10M stored vectors through it)."""
    best_s = np.full((len(q), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(q), k), dtype=np.int64)
    for ids, block in blocks:
        scores = np.concatenate([best_s, q @ block.T], axis=1)
        ids = np.concatenate([best_i, np.broadcast_to(ids, (len(q), len(ids)))], axis=1)
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(scores, top, 1), np.take_along_axis(ids, top, 1)
    return best_i
