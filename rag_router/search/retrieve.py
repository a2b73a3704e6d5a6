"""Fan out to the chosen tiers concurrently under one deadline; degrade when a tier fails.

A tier that errors or misses the deadline is reported in ``unavailable`` and the response
is marked degraded; only when every chosen tier fails does the request fail.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from indexers.records import TierName
from indexers.tiers.base import LegResults, SearchTier
from indexers.tiers.query import LegHit, SearchQuery
from rag_router.errors import BackendUnavailable

log = logging.getLogger(__name__)


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

    async def one(name: TierName) -> tuple[TierName, LegResults | BaseException]:
        started = time.perf_counter()
        try:
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + deadline - time.monotonic()):
                result: LegResults | BaseException = await tiers[name].search(query)
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
