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


def clustered(n: int, dim: int, seed: int, clusters: int = 40) -> np.ndarray:
    """Unit vectors around ``clusters`` centres: the shape of text embeddings IVF is made for."""
    rng = np.random.default_rng(seed)
    centres = unit_vectors(clusters, dim, seed + 100)
    x = centres[rng.integers(0, clusters, n)] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def recall_at(index: VectorIndex, x: np.ndarray, queries: np.ndarray, nprobe: int) -> float:
    exact = faiss.IndexFlatIP(x.shape[1])
    exact.add(x)
    _, want = exact.search(queries, 10)
    params = faiss.SearchParametersIVF(nprobe=nprobe)
    _, got = index.index.search(queries, 10, params=params)
    return float(np.mean([len(set(g) & set(w)) / 10 for g, w in zip(got, want, strict=True)]))


def test_nprobe_is_chosen_for_the_recall_target(tmp_path: Path) -> None:
    """The build sets the smallest probed share that reaches ``RECALL_TARGET`` against exact
    search (a fixed nlist/16 gave 0.95 at 1M chunks and would give less, slower, at 10M); on
    queries it never saw the recall holds, and a lower target probes fewer lists."""
    dim, n = 32, 8000
    x = clustered(n, dim, 4)
    index = VectorIndex(tmp_path / "v.faiss", dim, ivf_threshold=1000)
    index.build(np.arange(n, dtype=np.int64), x, TorchKMeans("cpu", rounds=4))
    ivf = faiss.extract_index_ivf(index.index)
    chosen = ivf.nprobe
    assert 1 <= chosen < ivf.nlist
    unseen = clustered(200, dim, 5)  # other vectors of the same clusters, not stored
    assert recall_at(index, x, unseen, chosen) >= cold_vectors.RECALL_TARGET - 0.04
    assert recall_at(index, x, unseen, max(1, chosen // 4)) < recall_at(index, x, unseen, chosen)
    seqs = np.arange(n, dtype=np.int64)
    assert cold_vectors.calibrate(index.index, seqs, x, target=0.5) < chosen
    assert ivf.parallel_mode == 1  # one query's lists spread over threads


def test_lists_are_retrained_once_the_store_outgrew_them(tmp_path: Path) -> None:
    index = VectorIndex(tmp_path / "v.faiss", 16, ivf_threshold=1000)
    index.build(np.arange(2000, dtype=np.int64), clustered(2000, 16, 6), TorchKMeans("cpu", rounds=2))
    assert faiss.extract_index_ivf(index.index).nlist == cold_vectors.lists_for(2000)
    assert not index.wants_rebuild(2000) and not index.wants_rebuild(7000)
    assert index.wants_rebuild(8000)  # 4x the vectors its lists were trained for
    assert index.wants_rebuild(999)  # back under the threshold: exact again


def test_vectors_added_later_go_to_the_lists_the_given_assign_finds(tmp_path: Path) -> None:
    dim, n = 16, 3000
    x = clustered(n, dim, 7)
    kmeans = TorchKMeans("cpu", rounds=2)
    index = VectorIndex(tmp_path / "v.faiss", dim, ivf_threshold=1000)
    index.build(np.arange(2000, dtype=np.int64), x[:2000], kmeans)
    calls: list[int] = []

    class Recording:
        def __call__(self, sample: np.ndarray, k: int) -> np.ndarray:
            return kmeans(sample, k)

        def assign(self, vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
            calls.append(len(vectors))
            return kmeans.assign(vectors, centroids)

    index.apply(list(range(2000, n)), x[2000:], [], Recording())
    assert calls == [1000] and index.index.ntotal == n
    found = [index.search(v, 1, None, exact=True)[0][0] for v in x[2000:2100]]
    assert found == list(range(2000, 2100))  # each one where a search looks for it


def test_kmeans_in_blocks_of_rows_finds_the_same_centroids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scores against every centroid are computed a block of rows at a time (all 3.2M sample
    vectors of a 10M-chunk build at once needed 161 GB on the GPU): the same lists either way."""
    from indexers.tiers import kmeans as km

    x = clustered(3000, 16, 8)
    whole = TorchKMeans("cpu", rounds=3)(x, 40)
    monkeypatch.setattr(km, "ROWS", 257)
    blocked = TorchKMeans("cpu", rounds=3)(x, 40)
    np.testing.assert_allclose(blocked, whole, atol=1e-5)
    assert (TorchKMeans("cpu").assign(x, whole) == TorchKMeans("cpu").assign(x, whole, rows=101)).all()
