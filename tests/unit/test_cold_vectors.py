"""The cold tier's IVF index with k-means and list assignment done by torch (the GPU path, on CPU)."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from indexers.tiers import cold_vectors
from indexers.tiers.cold_vectors import VectorIndex
from indexers.tiers.kmeans import TorchKMeans  # torch: a core dependency


def unit_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_lists_assigned_by_torch_hold_what_faiss_would_put_there(tmp_path: Path) -> None:
    dim, n = 32, 6000
    x, seqs = unit_vectors(n, dim, 0), np.arange(10, 10 + n, dtype=np.int64)
    kmeans = TorchKMeans("cpu", rounds=4)
    ours = VectorIndex(tmp_path / "a.faiss", dim, ivf_threshold=1000)
    ours.build(seqs, x, kmeans)
    theirs = VectorIndex(tmp_path / "b.faiss", dim, ivf_threshold=1000)
    theirs.build(seqs, x, lambda sample, k: kmeans(sample, k))  # same centroids, FAISS assigns
    assert not isinstance(ours.index, faiss.IndexIDMap2) and ours.index.ntotal == n
    centroids = ours.index.quantizer.reconstruct_n(0, ours.index.nlist)
    _, nearest = ours.index.quantizer.search(x, 1)  # FAISS's own choice of list per vector
    same = np.mean(kmeans.assign(x, centroids) == nearest[:, 0])
    assert same > 0.999  # float rounding may flip a tie
    stored = np.concatenate(
        [
            faiss.rev_swig_ptr(ours.index.invlists.get_ids(i), ours.index.invlists.list_size(i)).copy()
            for i in range(ours.index.nlist)
        ]
    )
    assert sorted(stored.tolist()) == seqs.tolist()  # each vector once, under its seq
    queries = unit_vectors(50, dim, 1)
    got = {seq for q in queries for seq, _ in ours.search(q, 10, None, exact=True)}
    want = {seq for q in queries for seq, _ in theirs.search(q, 10, None, exact=True)}
    assert len(got & want) >= 0.98 * len(want)


def test_quantizer_trained_on_a_bounded_sample_finds_the_same_neighbours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the lists trained elsewhere, the scalar quantizer learns its ranges from the first
    ``ENCODER_SAMPLE`` vectors of the shuffled sample: the index finds what the whole exact
    search finds (the vectors themselves, and most of their neighbours)."""
    dim, n = 32, 6000
    x, seqs = unit_vectors(n, dim, 2), np.arange(n, dtype=np.int64)
    monkeypatch.setattr(cold_vectors, "ENCODER_SAMPLE", 300)
    trained = cold_vectors.VectorIndex(tmp_path / "c.faiss", dim, ivf_threshold=1000)
    steps = trained.build(seqs, x, TorchKMeans("cpu", rounds=4))
    assert {"train", "kmeans", "add"} <= set(steps)
    exact = faiss.IndexFlatIP(dim)
    exact.add(x)
    _, want = exact.search(x[:100], 10)
    got = [[seq for seq, _ in trained.search(q, 10, None, exact=True)] for q in x[:100]]
    assert [g[0] for g in got] == list(range(100))  # each vector is its own nearest
    overlap = np.mean([len(set(g) & set(w.tolist())) / 10 for g, w in zip(got, want, strict=True)])
    assert overlap >= 0.9


def test_the_quantizer_trained_with_lists_from_torch_has_faiss_own_ranges(tmp_path: Path) -> None:
    """The scalar quantizer's ranges learnt from residuals whose lists torch found are the
    ones ``IndexIVF.train`` learns assigning them itself."""
    dim, n = 16, 3000
    x, seqs = unit_vectors(n, dim, 3), np.arange(n, dtype=np.int64)
    kmeans = TorchKMeans("cpu", rounds=2)
    ours = VectorIndex(tmp_path / "a.faiss", dim, ivf_threshold=1000)
    ours.build(seqs, x, kmeans)
    theirs = VectorIndex(tmp_path / "b.faiss", dim, ivf_threshold=1000)
    theirs.build(seqs, x, lambda sample, k: kmeans(sample, k))  # no assign: FAISS trains it
    assert ours.index.is_trained
    ranges = [faiss.vector_to_array(i.index.sq.trained) for i in (ours, theirs)]
    np.testing.assert_allclose(ranges[0], ranges[1], atol=1e-6)
