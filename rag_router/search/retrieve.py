"""Fan out to the chosen tiers concurrently under one deadline; degrade when a tier fails.

A tier that errors or misses the deadline is reported in ``unavailable`` and the response
is marked degraded; only when every chosen tier fails does the request fail.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from indexers.records import StoredChunk, TierName
from indexers.tiers.base import LegResults, SearchTier
from indexers.tiers.query import HitRef, LegHit, SearchQuery
from rag_router.errors import BackendUnavailable
from rag_router.search.fuse import Fused, Hit

log = logging.getLogger(__name__)

CROSS_LEG = "xdense"  # the dense leg of another model's vector in its own space (SearchQuery.cross)


@dataclass(slots=True)
class Retrieved:
    legs: dict[str, list[LegHit]] = field(default_factory=dict)  # "hot.dense" → hits
    timings_ms: dict[str, float] = field(default_factory=dict)
    unavailable: list[str] = field(default_factory=list)


async def retrieve(
    tiers: Mapping[TierName, SearchTier], chosen: Sequence[TierName], query: SearchQuery, *, deadline: float
) -> Retrieved:
    """``deadline`` is a ``time.monotonic()`` instant shared by the whole request."""
    out = Retrieved()

    cross = None
    if query.cross is not None and "dense" in query.legs:  # the other model's vector, in its space
        vector, space = query.cross
        cross = dataclasses.replace(query, vector=vector, space=space, legs=("dense",), cross=None)

    async def both(tier: SearchTier) -> LegResults:
        if cross is None:
            return await tier.search(query)
        own, other = await asyncio.gather(tier.search(query), tier.search(cross))
        return {**own, CROSS_LEG: other.get("dense", [])}

    async def one(name: TierName) -> tuple[TierName, LegResults | BaseException]:
        started = time.perf_counter()
        try:
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + deadline - time.monotonic()):
                result: LegResults | BaseException = await both(tiers[name])
        except Exception as exc:  # any tier failure degrades instead of failing the request
            log.warning("tier %s failed: %r", name, exc)
            result = exc
        out.timings_ms[name] = (time.perf_counter() - started) * 1000
        return name, result

    for name, result in await asyncio.gather(*(one(n) for n in chosen if n in tiers)):
        if isinstance(result, BaseException):
            out.unavailable.append(name)
            continue
        for leg, hits in result.items():
            out.legs[f"{name}.{leg}"] = hits
    missing = [n for n in chosen if n not in tiers]
    out.unavailable.extend(missing)
    if chosen and len(out.unavailable) == len(chosen):
        raise BackendUnavailable(f"no retrieval backend answered ({', '.join(out.unavailable)})")
    return out


async def hydrate(
    tiers: Mapping[TierName, SearchTier], fused: list[Fused], deadline: float
) -> tuple[list[Hit], list[TierName]]:
    """The chunks of the fused hits, from the tier each ranked best in (one call per tier).

    A hit whose chunk was deleted between search and fetch is dropped. A tier that fails
    or misses the deadline here loses its hits and is reported like one that failed the
    search (degraded), the other tier's hits stay.
    """
    wanted: dict[TierName, list[HitRef]] = {}
    for f in fused:
        if f.hit.chunk is None:
            wanted.setdefault(f.tier, []).append(f.hit.ref)
    found: dict[TierName, dict[HitRef, StoredChunk]] = {}
    failed: list[TierName] = []

    async def one(tier: TierName, refs: list[HitRef]) -> None:
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                found[tier] = await tiers[tier].hydrate(refs)
        except Exception as exc:  # like a failed search: degrade, do not fail the request
            log.warning("tier %s failed to fetch hits: %r", tier, exc)
            failed.append(tier)

    if len(wanted) == 1:
        await one(*next(iter(wanted.items())))
    elif wanted:
        await asyncio.gather(*(one(t, refs) for t, refs in wanted.items()))
    hits = []
    for f in fused:
        chunk = f.hit.chunk or found.get(f.tier, {}).get(f.hit.ref)
        if chunk is not None:
            hits.append(f.to_hit(chunk))
    return hits, failed
