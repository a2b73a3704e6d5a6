"""Per-query leg weights from what the legs returned: each leg is trusted as far as the others
corroborate its best hits. Pure.

Equal weights fit a collection where the legs are about as good; where one leg is clearly the
weaker (BM25 on long natural-language questions, a dense model on words it never saw), fusing
it at full weight pulls the hybrid below the better leg. Which leg is weaker shows per query in
how the legs agree: a leg's top hits that are relevant tend to score well in the other leg too
(a relevant passage shares words with the question, and means what it asks), while a leg's
false positives (a passage that repeats the question's filler words, a near-topic embedding
match) tend to score low there. So a leg's *support* is the mean score, in each other leg's
DBSF scale (mean ± 3σ → [0, 1], the fusion's own normalisation), of its top ``k`` hits; a hit
another leg did not return counts as that leg's lowest score.

The weights multiply the configured ones (policy: clause queries, a language the embedder does
not read) by ``(support / geometric mean of supports) ** gamma``, clamped to ``bounds``: legs that
support each other equally keep their weights exactly; one parameter sets how far the balance
may move. Nothing here reads the query's text, the embedder or the collection: the same rule
holds for any language and any model, because it reads only the scores the legs returned.
A leg whose scores are flat ranks nothing: it maps to 1 throughout, so it corroborates every
hit of the other leg that it returned, while its own top hits (an arbitrary order) get only the
other leg's average: it loses weight.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from indexers.tiers.query import LegHit


@dataclass(frozen=True, slots=True)
class Adaptive:
    """How far per-query evidence may move the configured leg weights."""

    k: int = 10  # top hits of a leg whose support is measured
    gamma: float = 1.0  # 0: the configured weights, unchanged
    low: float = 0.5  # the most a leg's weight may shrink, as a factor
    high: float = 2.0  # ... and grow


def dbsf_scale(scores: Sequence[float]) -> list[float]:
    """A leg's scores mapped linearly so that [μ - 3σ, μ + 3σ] becomes [0, 1] (sample σ); a leg
    with one score or flat scores maps to 1 throughout (it ranks nothing above anything)."""
    n = len(scores)
    if n < 2:
        return [1.0] * n
    mean = math.fsum(scores) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in scores) / (n - 1))
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return [1.0] * n
    return [(x - mean + 3 * sd) / (6 * sd) for x in scores]


def support(ranked: Mapping[str, Sequence[LegHit]], k: int) -> dict[str, float]:
    """Leg kind → the mean normalised score its top ``k`` hits get in the other legs."""
    scaled: dict[str, dict[int, float]] = {}
    floors: dict[str, float] = {}
    for kind, hits in ranked.items():
        values = dbsf_scale([h.score for h in hits])
        scaled[kind] = {h.key: v for h, v in zip(hits, values, strict=True)}
        floors[kind] = min(values, default=0.0)
    out: dict[str, float] = {}
    for kind, hits in ranked.items():
        top = [h.key for h in hits[:k]]
        others = [o for o in ranked if o != kind]
        if not top or not others:
            continue
        per_other = [math.fsum(scaled[o].get(key, floors[o]) for key in top) / len(top) for o in others]
        out[kind] = math.fsum(per_other) / len(per_other)
    return out


def adapt(
    ranked: Mapping[str, Sequence[LegHit]],
    weights: Mapping[str, float] | None,
    config: Adaptive = Adaptive(),
) -> dict[str, float]:
    """The configured weights of ``ranked``'s leg kinds, moved by their support.

    A leg of weight 0 (or an empty one) takes no part: it neither votes nor is voted on.
    """
    base = {kind: (weights or {}).get(kind, 1.0) for kind in ranked}
    voting = {kind: hits for kind, hits in ranked.items() if base[kind] > 0 and hits}
    if len(voting) < 2 or config.gamma == 0:
        return base
    # Floored above 0 so that the geometric mean and the power are defined; the clamp bounds it.
    sup = {kind: max(s, 1e-6) for kind, s in support(voting, config.k).items()}
    centre = math.exp(math.fsum(math.log(s) for s in sup.values()) / len(sup))
    for kind, s in sup.items():
        factor = (s / centre) ** config.gamma
        base[kind] *= min(max(factor, config.low), config.high)
    return base
