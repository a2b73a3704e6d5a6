"""Fusion of ranked legs (``hot.dense``, ``hot.lexical``, ``cold.dense``, ...). Pure.

Reciprocal rank fusion: score(d) = Σ_legs w_leg / (k + rank_leg(d)), ranks from 1.
With every weight 1 this is plain RRF (Cormack et al., 2009). Hits are deduplicated by
chunk id and keep the rank and raw score they had in every leg that returned them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from indexers.documents import Hit, LegHit, LegScore, StoredChunk, TierName


@dataclass(slots=True)
class _Acc:
    chunk: StoredChunk
    tier: TierName
    best_rank: int
    score: float
    legs: dict[str, LegScore]


def leg_tier(leg: str) -> TierName:
    tier = leg.split(".", 1)[0]
    if tier not in ("hot", "cold"):
        raise ValueError(f"leg {leg!r} does not name a tier")
    return tier  # type: ignore[return-value]


def rrf(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[Hit]:
    """Fuse named legs; ``weights`` maps a leg name or its kind ("dense", "lexical") to a weight."""
    acc: dict[str, _Acc] = {}
    for leg, hits in legs.items():
        weight = _weight(leg, weights)
        for rank, hit in enumerate(hits, 1):
            contribution = weight / (k + rank)
            entry = acc.get(hit.chunk.chunk_id)
            if entry is None:
                entry = acc[hit.chunk.chunk_id] = _Acc(hit.chunk, leg_tier(leg), rank, 0.0, {})
            elif rank < entry.best_rank:
                entry.tier, entry.best_rank = leg_tier(leg), rank
            entry.score += contribution
            entry.legs[leg] = LegScore(rank=rank, score=hit.score)
    fused = sorted(acc.values(), key=lambda e: (-e.score, e.best_rank, e.chunk.chunk_id))
    return [Hit(e.chunk, e.score, e.tier, e.legs) for e in fused[:limit]]


def _weight(leg: str, weights: Mapping[str, float] | None) -> float:
    if not weights:
        return 1.0
    if leg in weights:
        return weights[leg]
    return weights.get(leg.rsplit(".", 1)[-1], 1.0)
