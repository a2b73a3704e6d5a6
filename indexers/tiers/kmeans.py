"""k-means for the cold tier's IVF lists on a GPU (torch), for bulk loads on a machine that has one.

FAISS trains its coarse quantizer with k-means on the CPU: for 500k vectors and ~2,800 lists that
is most of a bulk load's index build. The same spherical k-means (inner product, as the index
searches) is a few matrix products a round on a GPU, and so is putting each vector in its list.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from indexers.records import Vector

# Vectors whose scores against every centroid are computed at once: 65,536 x 12,649 lists (10M
# vectors) is 3.3 GB; all 3.2M sample vectors at once, 161 GB, ran the H200 out of memory.
ROWS = 65_536


class TorchKMeans:
    """Spherical k-means on a torch device, and the nearest centroid of each vector (the IVF
    list a vector goes to: on a CPU that assignment was most of adding 500k vectors)."""

    def __init__(self, device: str = "cuda", rounds: int = 10, seed: int = 0) -> None:
        self.device, self.rounds, self.seed = device, rounds, seed

    def __call__(self, sample: Vector, k: int) -> Vector:
        import torch

        gen = torch.Generator(device="cpu").manual_seed(self.seed)
        x = torch.from_numpy(np.ascontiguousarray(sample, dtype=np.float32)).to(self.device)
        centroids = x[torch.randperm(len(x), generator=gen)[:k].to(self.device)].clone()
        for _ in range(self.rounds):
            nearest = torch.cat(
                [(x[at : at + ROWS] @ centroids.T).argmax(dim=1) for at in range(0, len(x), ROWS)]
            )
            sums = torch.zeros_like(centroids).index_add_(0, nearest, x)
            counts = torch.bincount(nearest, minlength=k).unsqueeze(1)
            moved = torch.where(counts > 0, sums / counts.clamp(min=1), centroids)
            centroids = torch.nn.functional.normalize(moved, dim=1)
        return np.asarray(centroids.float().cpu().numpy())

    def assign(self, vectors: Vector, centroids: Vector, rows: int = ROWS) -> np.ndarray[Any, Any]:
        """Index of the centroid with the largest inner product, per vector."""
        import torch

        c = torch.from_numpy(np.ascontiguousarray(centroids, dtype=np.float32)).to(self.device)
        out = np.empty(len(vectors), dtype=np.int64)
        for at in range(0, len(vectors), rows):
            part = vectors[at : at + rows]
            x = torch.tensor(part, dtype=torch.float32, device=self.device)  # a copy: SQLite's are read-only
            out[at : at + len(part)] = (x @ c.T).argmax(dim=1).cpu().numpy()
        return out


def torch_kmeans(device: str = "cuda", rounds: int = 10, seed: int = 0) -> TorchKMeans:
    return TorchKMeans(device, rounds, seed)
