"""Fusion of ranked legs (``hot.dense``, ``hot.lexical``, ``cold.dense``, ...). Pure.

Two steps. First the tiers' lists of one leg kind are merged by score into one ranking (dense
scores are cosines in both tiers; lexical scores are BM25 in both), so a tier's weak best match
does not count as a rank-1 hit. Then reciprocal rank fusion across leg kinds:
score(d) = Σ_kinds w_kind / (k + rank_kind(d)), ranks from 1 (Cormack et al., 2009); with every
weight 1 this is plain RRF. Hits are deduplicated by their key (the same chunk in two tiers is
one hit) and keep the rank and raw score they had in each tier's leg that returned them.

Beside RRF, two score-based fusions that Qdrant and Elasticsearch also offer: ``dbsf``
(distribution-based score fusion: each leg's scores normalised by mean ± 3 standard deviations,
as Qdrant's DBSF) and ``convex`` (min-max normalised scores, weighted sum: Elasticsearch's
linear retriever). Both use the same leg weights. ``adaptive`` is DBSF whose weights are moved
per query by each leg's lead (its best hit over the hit k places below) as far as the legs
disagree on their top k (``adaptive.py``).

Fusion needs keys and scores only; the chunks of the few fused hits that are kept are fetched
afterwards (``Fused.hit.ref`` → ``Tier.hydrate``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from indexers.records import StoredChunk, TierName
from indexers.tiers.query import LegHit
from rag_router.search.adaptive import Adaptive, adapt, dbsf_scale


@dataclass(frozen=True, slots=True)
class LegScore:
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class Hit:
    """A fused result: the chunk, its fused score, and the rank and score it had in every leg."""

    chunk: StoredChunk
    score: float
    tier: TierName
    legs: Mapping[str, LegScore]

    @property
    def chunk_id(self) -> str:
        return self.chunk.chunk_id

    @property
    def doc_id(self) -> str:
        return self.chunk.doc_id


@dataclass(slots=True)
class Fused:
    """A fused result before its chunk is known: ``hit`` is its entry in ``tier``'s leg."""

    key: int
    score: float
    tier: TierName
    legs: dict[str, LegScore]
    hit: LegHit
    best: int  # best merged rank, for ties and the hit's tier

    def to_hit(self, chunk: StoredChunk) -> Hit:
        return Hit(chunk, self.score, self.tier, self.legs)


def leg_tier(leg: str) -> TierName:
    tier = leg.split(".", 1)[0]
    if tier not in ("hot", "cold"):
        raise ValueError(f"leg {leg!r} does not name a tier")
    return tier  # type: ignore[return-value]


def merge_tiers(legs: Mapping[str, Sequence[LegHit]]) -> dict[str, list[tuple[str, LegHit]]]:
    """Leg kind → (tier leg name, hit) across tiers, best score first, one entry per key."""
    kinds: dict[str, list[str]] = {}
    for name in legs:
        leg_tier(name)
        kinds.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    merged: dict[str, list[tuple[str, LegHit]]] = {}
    for kind, names in kinds.items():
        entries = [(name, h) for name in names for h in legs[name]]
        if len(names) > 1:  # one tier's list is ranked already
            entries.sort(key=lambda e: -e[1].score)
        seen: set[int] = set()
        ranked = []
        for name, hit in entries:
            if hit.key not in seen:
                seen.add(hit.key)
                ranked.append((name, hit))
        merged[kind] = ranked
    return merged


FusionName = Literal["rrf", "dbsf", "convex", "adaptive"]


def rrf(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[Fused]:
    """Fuse named legs; ``weights`` maps a leg kind ("dense", "lexical") to a weight.

    Hot path (2 × 100 candidates a request): scores accumulate in plain dicts, and result
    objects and per-leg ranks are built for the ``limit`` kept hits only.
    """
    return _fuse(
        legs, lambda ranked: [1.0 / (k + rank) for rank in range(1, len(ranked) + 1)], weights, limit
    )


def dbsf(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[Fused]:
    """Distribution-based score fusion: a leg's scores mapped linearly so that [μ - 3σ, μ + 3σ]
    becomes [0, 1] (σ of the sample, as qdrant-client computes it). Not clipped: clipping would
    tie a leg's few outliers at 1 and lose the order between them."""

    return _fuse(legs, _dbsf_normalise, weights, limit)


def adaptive(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
    config: Adaptive = Adaptive(),
) -> list[Fused]:
    """DBSF with the leg weights moved per query by the legs' agreement (``adaptive.adapt``)."""
    return _fuse(legs, _dbsf_normalise, weights, limit, adapt_by=config)


def _dbsf_normalise(ranked: list[tuple[str, LegHit]]) -> list[float]:
    # not statistics.stdev: its exact fractions cost ~0.1 ms a leg
    return dbsf_scale([h.score for _, h in ranked])


def convex(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[Fused]:
    """Convex combination: each leg's scores min-max normalised to [0, 1], then weighted and summed."""

    def normalise(ranked: list[tuple[str, LegHit]]) -> list[float]:
        scores = [h.score for _, h in ranked]
        if not scores:
            return []
        lo, hi = min(scores), max(scores)
        return [(x - lo) / (hi - lo) if hi > lo else 1.0 for x in scores]

    return _fuse(legs, normalise, weights, limit)


def fuse(
    method: FusionName,
    legs: Mapping[str, Sequence[LegHit]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[Fused]:
    if method == "rrf":
        return rrf(legs, k=k, weights=weights, limit=limit)
    if method == "adaptive":
        return adaptive(legs, weights=weights, limit=limit)
    return (dbsf if method == "dbsf" else convex)(legs, weights=weights, limit=limit)


def _fuse(
    legs: Mapping[str, Sequence[LegHit]],
    contribution: Callable[[list[tuple[str, LegHit]]], list[float]],
    weights: Mapping[str, float] | None,
    limit: int | None,
    adapt_by: Adaptive | None = None,
) -> list[Fused]:
    """Σ over leg kinds of weight × contribution; ``contribution`` scores one merged ranking.

    Ties are broken by the best rank a hit has in a weighted leg. A leg of weight 0 only fills
    in: its hits score 0, after every hit of a weighted leg, in its own order.
    """
    score: dict[int, float] = {}
    best: dict[int, tuple[int, str, LegHit]] = {}  # key → (best merged rank, its leg, its hit)
    weighted: set[int] = set()  # hits of a leg with a weight: all of them rank before the fill
    merged = merge_tiers(legs)
    if adapt_by is not None:
        weights = adapt({kind: [h for _, h in ranked] for kind, ranked in merged.items()}, weights, adapt_by)
    by_weight = sorted(merged, key=lambda kind: (weights or {}).get(kind, 1.0) == 0)  # weighted first
    for kind in by_weight:
        ranked = merged[kind]
        weight = (weights or {}).get(kind, 1.0)
        for rank, ((name, hit), value) in enumerate(zip(ranked, contribution(ranked), strict=True), 1):
            key = hit.key
            score[key] = score.get(key, 0.0) + weight * value
            if key not in best or (weight and rank < best[key][0]):
                best[key] = (rank, name, hit)
            if weight:
                weighted.add(key)
    order = sorted(score, key=lambda key: (key not in weighted, -score[key], best[key][0], key))[:limit]
    fused = {
        key: Fused(key, score[key], leg_tier(best[key][1]), {}, best[key][2], best[key][0]) for key in order
    }
    for name, hits in legs.items():
        for rank, hit in enumerate(hits, 1):
            entry = fused.get(hit.key)
            if entry is not None:
                entry.legs[name] = LegScore(rank=rank, score=hit.score)
    return list(fused.values())
