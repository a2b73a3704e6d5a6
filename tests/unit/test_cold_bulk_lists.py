"""A bulk load into a cold tier that already holds vectors trains FAISS's lists with the load's
k-means (a GPU's, where there is one) when the store outgrew them, and puts the load's vectors
in their lists with it otherwise. At 1M chunks the CPU's k-means over SQLite took ~290 of the
352 s of a load into a non-empty tier (bench/scale.py)."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np

from indexers.records import Chunk, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers import cold_vectors
from indexers.tiers.cold_segment import write_segment
from indexers.tiers.kmeans import TorchKMeans
from indexers.tiers.local_cold import LocalCold

DIM = 8


class Recording(TorchKMeans):
    """The GPU's k-means, on the CPU, counting what it was asked."""

    def __init__(self) -> None:
        super().__init__("cpu", rounds=2)
        self.trained: list[int] = []
        self.assigned: list[int] = []

    def __call__(self, sample: np.ndarray, k: int) -> np.ndarray:
        self.trained.append(k)
        return super().__call__(sample, k)

    def assign(self, vectors: np.ndarray, centroids: np.ndarray, rows: int = 65_536) -> np.ndarray:
        self.assigned.append(len(vectors))
        return super().assign(vectors, centroids, rows)


def items(first: int, n: int) -> list[EmbeddedChunk]:
    x = np.random.default_rng(first).standard_normal((n, DIM)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return [
        EmbeddedChunk(Chunk(f"d{i}#0", f"d{i}", 0, f"text {i}", None, {}), x[i - first])
        for i in range(first, first + n)
    ]


def load(cold: LocalCold, path: Path, chunks: list[EmbeddedChunk], kmeans: Recording) -> None:
    write_segment(path, chunks, Analyzer())
    cold.bulk_begin(threads=1, kmeans=kmeans)
    cold.adopt([path])
    cold.bulk_end()


def nlist(cold: LocalCold) -> int:
    return int(faiss.extract_index_ivf(cold._parts()[2].index).nlist)


def test_loads_into_a_tier_that_holds_vectors_use_the_loads_kmeans(tmp_path: Path) -> None:
    cold = LocalCold(tmp_path / "cold", dim=DIM, analyzer=Analyzer(), ivf_threshold=500)
    cold.upsert(items(0, 100))  # exact index, written one by one
    kmeans = Recording()
    load(cold, tmp_path / "a.segment", items(100, 900), kmeans)  # 1,000: IVF now
    assert kmeans.trained == [cold_vectors.lists_for(1000)] and nlist(cold) == kmeans.trained[0]
    load(cold, tmp_path / "b.segment", items(1000, 300), kmeans)  # lists still fit: vectors added
    assert len(kmeans.trained) == 1 and kmeans.assigned[-1] == 300
    last = items(1300, 2700)
    load(cold, tmp_path / "c.segment", last, kmeans)  # 4,000: outgrown, retrained
    assert kmeans.trained[1:] == [cold_vectors.lists_for(4000)] and nlist(cold) == kmeans.trained[1]
    vectors = cold._parts()[2]
    assert vectors.index.ntotal == 4000
    seq = cold._parts()[0].reader().execute("SELECT seq FROM chunks WHERE chunk_id = 'd3000#0'")
    assert vectors.search(last[1700].vector, 1, None, exact=True)[0][0] == seq.fetchone()[0]
    cold.close()


def test_a_load_whose_kmeans_fails_still_ends_with_every_vector(tmp_path: Path) -> None:
    """The load's k-means fails (the H200 ran out of memory at 10M chunks): FAISS is built with
    its own k-means instead, and the load ends whole rather than leaving the index to a start-up."""

    class OutOfMemory(Recording):
        def __call__(self, sample: np.ndarray, k: int) -> np.ndarray:
            raise RuntimeError("CUDA out of memory")

    cold = LocalCold(tmp_path / "cold", dim=DIM, analyzer=Analyzer(), ivf_threshold=500)
    load(cold, tmp_path / "a.segment", items(0, 1000), OutOfMemory())
    vectors = cold._parts()[2]
    assert vectors.index.ntotal == 1000 and nlist(cold) == cold_vectors.lists_for(1000)
    assert int(vectors.watermark_file.read_text()) == cold._parts()[0].version()
    cold.close()


def test_opening_a_tier_leaves_outgrown_lists_to_optimize(tmp_path: Path) -> None:
    """A store that outgrew its lists by single writes is not retrained when it opens (a start-up
    stays quick); ``optimize`` (after a CLI ingest) retrains them."""
    cold = LocalCold(tmp_path / "cold", dim=DIM, analyzer=Analyzer(), ivf_threshold=500)
    load(cold, tmp_path / "a.segment", items(0, 1000), Recording())
    for first in range(1000, 4000, 1000):
        cold.upsert(items(first, 1000))
    cold.close()
    reopened = LocalCold(tmp_path / "cold", dim=DIM, analyzer=Analyzer(), ivf_threshold=500)
    assert nlist(reopened) == cold_vectors.lists_for(1000) and reopened._parts()[2].index.ntotal == 4000
    assert reopened.optimize() is True
    assert nlist(reopened) == cold_vectors.lists_for(4000) and reopened._parts()[2].index.ntotal == 4000
    reopened.close()
