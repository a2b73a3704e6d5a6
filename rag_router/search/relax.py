"""Routed retrieval: the route's tiers (fixed, or the cascade), then the relaxation ladder.

One call for the search flow (``retrieve_routed``); the fan-out to tiers under one deadline is
``rag_router.search.retrieve``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from indexers.records import TierName
from indexers.tiers.base import SearchTier
from indexers.tiers.query import Filters, SearchQuery
from rag_router.errors import BackendUnavailable
from rag_router.search.retrieve import Retrieved, retrieve
from rag_router.search.route import Policy, Route


@dataclass(slots=True)
class Run:
    """What was searched in the end: the legs, the tiers, the filters applied, and why."""

    retrieved: Retrieved
    tiers: list[TierName]
    filters: Filters
    reasons: list[str]
    relaxed: bool = False  # a step of the ladder was taken: the implied filters left too little

    @property
    def distinct(self) -> int:
        """How many different chunks the legs found."""
        return _distinct(self.retrieved)


async def retrieve_routed(
    tiers: Mapping[TierName, SearchTier],
    route: Route,
    query: SearchQuery,
    *,
    policy: Policy,
    deadline: float,
    trust_dense: bool,
    widen_space: bool = False,
) -> Run:
    """The route's tiers (fixed, or the cascade), then the relaxation ladder when the implied
    filters leave too little: widen to both tiers, drop the lesser implied filters one more at a
    time (``policy.relax_first``), then drop them all. ``Run.reasons`` says each step taken.

    ``widen_space``: the ladder's first rung lets a dense leg kept to its model's chunks
    (``query.space``) meet every chunk, under the same filters, before any is dropped (the search
    flow says for which queries: a split embedder's second model's, whose own chunks score far
    above the others). Only under implied filters: they keep the candidates to what the query
    names, where the other model's scores (noise against this vector) only order a few; with no
    filter they would rank the whole corpus by noise at full weight."""
    if route.cascade and not trust_dense:  # the cascade's threshold is a cosine of this embedder
        reason = "the cascade's threshold cannot judge this query's dense score: hot and cold searched"
        route = dataclasses.replace(
            route, tiers=("hot", "cold"), cascade=False, reasons=(*route.reasons, reason)
        )
    run = await (
        _cascade(tiers, route, query, policy.cascade_min_score, deadline)
        if route.cascade
        else _fixed(tiers, route, query, deadline)
    )
    enough = policy.min_hits_with_implied_filters
    if not route.has_implied_filters or _distinct(run.retrieved) >= enough:
        return run
    if widen_space and query.space is not None and "dense" in query.legs and query.vector is not None:
        # first the dense leg meets the other model's chunks too, under the same filters: "第二十条
        # 规定了什么" over an English law (no word matches, no Chinese chunk is Article 20)
        few = _distinct(run.retrieved)
        query = dataclasses.replace(query, space=None)
        run = Run(
            await retrieve(tiers, run.tiers, query, deadline=deadline),
            run.tiers,
            run.filters,
            [
                *run.reasons,
                f"implied filters left {few} hits: the dense leg also searched the other model's chunks",
            ],
        )
    if not route.has_implied_filters or _distinct(run.retrieved) >= enough:
        return run
    both: tuple[TierName, ...] = ("hot", "cold")
    if tuple(run.tiers) != both:  # first widen to every tier, keeping the filters
        wider = await retrieve(tiers, both, query, deadline=deadline)
        if _distinct(wider) >= enough:
            reason = f"{_distinct(run.retrieved)} hits in {'+'.join(run.tiers)}: widened to hot and cold"
            return Run(wider, list(both), run.filters, [*run.reasons, reason], relaxed=True)
    implied = [k for k in query.filters.keywords if k not in route.relaxed.keywords]
    dropped: list[str] = []  # then drop the lesser implied filters, one more at a time
    for key in policy.relax_first:
        if key not in implied or len(implied) <= len(dropped) + 1:
            continue
        dropped.append(key)
        keywords = {k: v for k, v in query.filters.keywords.items() if k not in dropped}
        narrower = dataclasses.replace(query.filters, keywords=keywords)
        found = await retrieve(tiers, both, dataclasses.replace(query, filters=narrower), deadline=deadline)
        if _distinct(found) >= enough:
            reason = f"nothing matched with {', '.join(dropped)}: dropped {', '.join(dropped)}"
            return Run(found, list(both), narrower, [*run.reasons, reason], relaxed=True)
    relaxed = dataclasses.replace(query, filters=route.relaxed)
    retry = await retrieve(tiers, both, relaxed, deadline=deadline)
    reason = f"implied filters left {_distinct(run.retrieved)} hits: dropped them, searched hot and cold"
    return Run(retry, list(both), route.relaxed, [*run.reasons, reason], relaxed=True)


async def _fixed(
    tiers: Mapping[TierName, SearchTier], route: Route, query: SearchQuery, deadline: float
) -> Run:
    retrieved = await retrieve(tiers, route.tiers, query, deadline=deadline)
    return Run(retrieved, list(route.tiers), route.filters, list(route.reasons))


async def _cascade(
    tiers: Mapping[TierName, SearchTier], route: Route, query: SearchQuery, threshold: float, deadline: float
) -> Run:
    """Hot first; cold too when hot fails or its best dense match is below ``threshold`` (a
    cosine of the embedder: ``retrieve_routed`` skips the cascade for queries it cannot read)."""
    reasons = list(route.reasons)
    try:
        first = await retrieve(tiers, ("hot",), query, deadline=deadline)
    except BackendUnavailable:
        first = Retrieved(unavailable=["hot"])
    dense = first.legs.get("hot.dense", [])
    best = dense[0].score if dense else None
    if best is not None and best >= threshold and "dense" in query.legs:
        reasons.append(f"hot's best match {best:.2f} ≥ {threshold:g}: cold skipped")
        return Run(first, ["hot"], route.filters, reasons)
    shown = "none" if best is None else f"{best:.2f}"
    reasons.append(f"hot's best match {shown} < {threshold:g}: cold searched too")
    try:
        second = await retrieve(tiers, ("cold",), query, deadline=deadline)
    except BackendUnavailable:
        if not first.legs:
            raise BackendUnavailable("no retrieval backend answered (hot, cold)") from None
        second = Retrieved(unavailable=["cold"])
    merged = Retrieved(
        legs={**first.legs, **second.legs},
        timings_ms={**first.timings_ms, **second.timings_ms},
        unavailable=[*first.unavailable, *second.unavailable],
    )
    return Run(merged, ["hot", "cold"], route.filters, reasons)


def _distinct(retrieved: Retrieved) -> int:
    return len({h.key for hits in retrieved.legs.values() for h in hits})
