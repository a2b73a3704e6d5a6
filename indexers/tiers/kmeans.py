"""k-means for the cold tier's IVF lists on a GPU (torch), for bulk loads on a machine that has one.

FAISS trains its coarse quantizer with k-means on the CPU: for 500k vectors and ~2,800 lists that
is most of a bulk load's index build. The same spherical k-means (inner product, as the index
searches) is a few matrix products a round on a GPU.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from indexers.records import Vector


def torch_kmeans(device: str = "cuda", rounds: int = 10, seed: int = 0) -> Callable[[Vector, int], Vector]:
    def kmeans(sample: Vector, k: int) -> Vector:
        import torch

        gen = torch.Generator(device="cpu").manual_seed(seed)
        x = torch.from_numpy(np.ascontiguousarray(sample, dtype=np.float32)).to(device)
        centroids = x[torch.randperm(len(x), generator=gen)[:k].to(device)].clone()
        for _ in range(rounds):
            nearest = (x @ centroids.T).argmax(dim=1)
            sums = torch.zeros_like(centroids).index_add_(0, nearest, x)
            counts = torch.bincount(nearest, minlength=k).unsqueeze(1)
            moved = torch.where(counts > 0, sums / counts.clamp(min=1), centroids)
            centroids = torch.nn.functional.normalize(moved, dim=1)
        return np.asarray(centroids.float().cpu().numpy())

    return kmeans
