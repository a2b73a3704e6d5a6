"""Fusion of ranked legs (``hot.dense``, ``hot.lexical``, ``cold.dense``, ...). Pure.

Two steps. First the tiers' lists of one leg kind are merged by score into one ranking (dense
scores are cosines in both tiers; lexical scores are BM25 in both), so a tier's weak best match
does not count as a rank-1 hit. Then reciprocal rank fusion across leg kinds:
score(d) = Σ_kinds w_kind / (k + rank_kind(d)), ranks from 1 (Cormack et al., 2009); with every
weight 1 this is plain RRF. Hits are deduplicated by chunk id and keep the rank and raw score they
had in each tier's leg that returned them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from indexers.documents import Hit, LegHit, LegScore, StoredChunk, TierName


@dataclass(slots=True)
class _Acc:
    chunk: StoredChunk
    tier: TierName
    best: float  # best merged rank, for ties and the hit's tier
    score: float
    legs: dict[str, LegScore]


def leg_tier(leg: str) -> TierName:
    tier = leg.split(".", 1)[0]
    if tier not in ("hot", "cold"):
        raise ValueError(f"leg {leg!r} does not name a tier")
    return tier  # type: ignore[return-value]


def merge_tiers(legs: Mapping[str, Sequence[LegHit]]) -> dict[str, list[tuple[str, LegHit]]]:
    """Leg kind → (tier leg name, hit) across tiers, best score first, one entry per chunk."""
    kinds: dict[str, list[tuple[str, LegHit]]] = {}
    for name, hits in legs.items():
        leg_tier(name)
        kinds.setdefault(name.rsplit(".", 1)[-1], []).extend((name, h) for h in hits)
    merged: dict[str, list[tuple[str, LegHit]]] = {}
    for kind, entries in kinds.items():
        seen: set[str] = set()
        ranked = []
        for name, hit in sorted(entries, key=lambda e: -e[1].score):
            if hit.chunk.chunk_id not in seen:
                seen.add(hit.chunk.chunk_id)
                ranked.append((name, hit))
        merged[kind] = ranked
    return merged


def rrf(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[Hit]:
    """Fuse named legs; ``weights`` maps a leg kind ("dense", "lexical") to a weight."""
    acc: dict[str, _Acc] = {}
    for kind, ranked in merge_tiers(legs).items():
        weight = (weights or {}).get(kind, 1.0)
        for rank, (name, hit) in enumerate(ranked, 1):
            entry = acc.get(hit.chunk.chunk_id)
            if entry is None:
                entry = acc[hit.chunk.chunk_id] = _Acc(hit.chunk, leg_tier(name), rank, 0.0, {})
            elif rank < entry.best:
                entry.tier, entry.best = leg_tier(name), rank
            entry.score += weight / (k + rank)
    for name, hits in legs.items():
        for rank, hit in enumerate(hits, 1):
            if hit.chunk.chunk_id in acc:
                acc[hit.chunk.chunk_id].legs[name] = LegScore(rank=rank, score=hit.score)
    fused = sorted(acc.values(), key=lambda e: (-e.score, e.best, e.chunk.chunk_id))
    return [Hit(e.chunk, e.score, e.tier, e.legs) for e in fused[:limit]]
