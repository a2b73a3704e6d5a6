"""Per-query leg weights from what the legs returned: how clearly each leg's best hit leads,
and how far the legs agree. Pure.

Equal weights fit a collection where the legs are about as good; where one leg is the weaker
(BM25 on long natural-language questions, a dense model on words it never saw), fusing it at
full weight pulls the hybrid below the better leg. Per query, two things the legs return say
which to trust:

- **Lead.** A leg that found what the query asks for tends to rank one hit clearly above the
  rest; a leg that matched noise returns a flat head (many hits about as good). The lead is the
  best hit's margin over the hit ``k`` places below it, in the leg's own DBSF scale (mean ± 3σ
  of its candidates → [0, 1], the fusion's normalisation), so cosines and BM25 compare without
  a per-model constant. A leg whose scores are flat has no lead.
- **Agreement.** When the legs' top ``k`` overlap, fusing them is safe whatever their leads;
  when they disagree, the fused list has to choose, and the leg with the clearer lead is the
  better bet. The overlap (shared top-``k`` hits over ``k``) scales how far leads may move the
  weights: full agreement keeps the configured weights exactly.

A leg's weight is its configured one (the policy's: clause queries, a language the embedder
does not read) times ``(lead / geometric mean of the leads) ** (gamma × (1 - overlap))``,
clamped to ``[low, high]``. Neither the query's text nor the model is read: the rule holds for
any language and any embedder because it reads only the scores the legs returned (a query in
a language the embedder cannot read gets a flat, disagreeing dense leg, and loses its weight
here even where the policy has not zeroed it). The query's length showed no relation to which
leg wins on the shared sets, so it is not a signal here; its effect on BM25 (a long question's
many common words flatten the head) is read from the scores.

Opt-in (``RAG_RETRIEVAL__FUSION=adaptive``), not the default: measured on the shared sets it
gains where one leg is weak for a query (GDPR +0.003, a dense leg that cannot read Chinese
+0.020, Cranfield +0.001, US Constitution with multilingual-e5 +0.006 nDCG@10) but costs
SciFact 0.004 on both splits (0.7400 → 0.7359 on test), where the legs are complementary and
DBSF's own normalisation already gives a leading hit its due; no setting of ``k``, ``gamma``,
the bounds or a dead zone tried kept SciFact and the gains (docs/benchmarks.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from indexers.tiers.query import LegHit


@dataclass(frozen=True, slots=True)
class Adaptive:
    """How far per-query evidence may move the configured leg weights. The values are the ones
    that cost least on SciFact's train queries while gaining on one half of every other shared
    set (k 3, 5, 10 and gamma 1, 2, 3 tried)."""

    k: int = 5  # the lead is over the hit k places below the best; agreement over the top k
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


def lead(hits: Sequence[LegHit], k: int) -> float:
    """The best hit's margin over the hit ``k`` places below it (or the last), in DBSF units."""
    scaled = dbsf_scale([h.score for h in hits])
    return scaled[0] - scaled[min(k, len(scaled) - 1)] if len(scaled) > 1 else 0.0


def agreement(ranked: Mapping[str, Sequence[LegHit]], k: int) -> float:
    """The share of the top ``k`` that every leg has in its own top ``k`` (of the shortest leg's
    top when a leg returned fewer: two legs with the same three hits agree fully)."""
    tops = [{h.key for h in hits[:k]} for hits in ranked.values()]
    if not tops or not min(tops, key=len):
        return 0.0
    return len(set.intersection(*tops)) / len(min(tops, key=len))


def adapt(
    ranked: Mapping[str, Sequence[LegHit]],
    weights: Mapping[str, float] | None,
    config: Adaptive = Adaptive(),
) -> dict[str, float]:
    """The configured weights of ``ranked``'s leg kinds, moved by their leads and agreement.

    Only legs with a weight and two hits or more vote (one hit has no lead to read); the others
    keep their configured weight.
    """
    base = {kind: (weights or {}).get(kind, 1.0) for kind in ranked}
    voting = {kind: hits for kind, hits in ranked.items() if base[kind] > 0 and len(hits) > 1}
    if len(voting) < 2 or config.gamma == 0:
        return base
    power = config.gamma * (1.0 - agreement(voting, config.k))
    # Floored above 0 so that the geometric mean and the power are defined; the clamp bounds it.
    leads = {kind: max(lead(hits, config.k), 1e-6) for kind, hits in voting.items()}
    centre = math.exp(math.fsum(math.log(x) for x in leads.values()) / len(leads))
    for kind, x in leads.items():
        base[kind] *= min(max((x / centre) ** power, config.low), config.high)
    return base
