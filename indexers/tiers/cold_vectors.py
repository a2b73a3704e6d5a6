"""The cold tier's vector index: FAISS, exact below a size threshold and IVF-SQ8 above it."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from indexers.records import Vector
from indexers.tiers.cold_store import write_atomic

KMeans = Callable[[Vector, int], Vector]
# Vectors the scalar quantizer learns its ranges from (per dimension, of the residuals to the
# lists' centroids) when the lists were trained elsewhere: FAISS assigns each training vector to
# its list on the CPU first, which over 256 vectors a list was most of the index build at 2M
# chunks. 65,536 measured the same recall as the whole sample (docs/benchmarks.md).
ENCODER_SAMPLE = 65_536


class VectorIndex:
    """FAISS over SQLite rows; the file is a cache that ``catch_up`` repairs."""

    def __init__(self, path: Path, dim: int, ivf_threshold: int) -> None:
        self.path = path
        self.dim = dim
        self.ivf_threshold = ivf_threshold
        self.watermark_file = path.with_suffix(".watermark")
        self.lock = threading.Lock()
        self.index: Any = None
        self.dirty = False

    def load(self) -> int:
        """Open the saved index; returns its watermark (0 when rebuilt from scratch)."""
        if self.path.exists() and self.watermark_file.exists():
            self.index = faiss.read_index(str(self.path))
            return int(self.watermark_file.read_text())
        self.index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        return 0

    def wants_rebuild(self, n: int) -> bool:
        is_ivf = self.index is not None and not isinstance(self.index, faiss.IndexIDMap2)
        return (n >= self.ivf_threshold) != is_ivf

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
            nlist = int(4 * math.sqrt(n))
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
            index.nprobe = max(8, nlist // 16)
            steps["train"] = time.perf_counter() - began
            began = time.perf_counter()
            if assign is not None:  # FAISS only encodes
                x = np.ascontiguousarray(vectors, dtype=np.float32)
                ids = np.ascontiguousarray(seqs, dtype=np.int64)
                lists = np.ascontiguousarray(assign(x, centroids), dtype=np.int64)
                index.add_core(n, faiss.swig_ptr(x), faiss.swig_ptr(ids), faiss.swig_ptr(lists))
                n = 0
        if n:
            index.add_with_ids(vectors, seqs)
        steps["add"] = time.perf_counter() - began
        with self.lock:
            self.index = index
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

    def apply(self, seqs: Sequence[int], vectors: Vector, deleted: Sequence[int]) -> None:
        with self.lock:
            gone = np.asarray(list(seqs) + list(deleted), dtype=np.int64)
            if len(gone):
                self.index.remove_ids(gone)
            if len(seqs):
                self.index.add_with_ids(vectors, np.asarray(seqs, dtype=np.int64))
            self.dirty = True

    def search(
        self, vector: Vector, k: int, allowed: np.ndarray[Any, Any] | None, exact: bool
    ) -> list[tuple[int, float]]:
        with self.lock:
            if self.index.ntotal == 0 or (allowed is not None and len(allowed) == 0):
                return []
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
        with self.lock:
            if not self.dirty:
                return
            tmp = self.path.with_suffix(".tmp")
            faiss.write_index(self.index, str(tmp))
            tmp.replace(self.path)
            self.dirty = False
        write_atomic(self.watermark_file, str(version))
