"""The query flow, top to bottom: route → embed → retrieve → fuse → respond.

Until the router lands, routing is explicit: ``hot``, ``cold`` or ``both``; ``auto`` means
both. Answer generation (prompt compiler, LLM) plugs in after fusion.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from indexers.documents import LEGS, Filters, Hit, Leg, SearchQuery, TierName
from indexers.embed import AsyncEmbedder
from indexers.lexical import Analyzer
from indexers.tiers.base import Tier
from rag_router.errors import InvalidRequest
from rag_router.filters import filters_to_json
from rag_router.fuse import rrf
from rag_router.metrics import Metrics
from rag_router.retrieve import retrieve

log = logging.getLogger(__name__)

RouteName = Literal["auto", "hot", "cold", "both"]
_ROUTES: dict[str, tuple[TierName, ...]] = {"hot": ("hot",), "cold": ("cold",), "both": ("hot", "cold")}


@dataclass(frozen=True, slots=True)
class SearchParams:
    query: str
    top_k: int = 10
    route: RouteName = "auto"
    filters: Filters = field(default_factory=Filters)
    legs: tuple[Leg, ...] = LEGS
    depth: int | None = None  # candidates per leg; default max(top_k, settings depth)
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True, slots=True)
class Route:
    tiers: tuple[TierName, ...]
    reason: str
    filters: Filters


@dataclass(slots=True)
class SearchOutcome:
    hits: list[Hit]
    route: Route
    timings_ms: dict[str, float]
    unavailable: list[str]
    request_id: str

    @property
    def degraded(self) -> bool:
        return bool(self.unavailable)

    def route_json(self) -> dict[str, Any]:
        return {
            "tiers": list(self.route.tiers),
            "reason": self.route.reason,
            "features": {},
            "filters": filters_to_json(self.route.filters),
        }


def choose_route(params: SearchParams) -> Route:
    if params.route == "auto":
        return Route(("hot", "cold"), "auto: both tiers (feature routing not enabled)", params.filters)
    return Route(_ROUTES[params.route], f"explicit route {params.route!r}", params.filters)


class Searcher:
    """Answers ``/v1/search``: owns no clients, only uses the ones it is given."""

    def __init__(
        self,
        *,
        embedder: AsyncEmbedder,
        analyzer: Analyzer,
        tiers: Mapping[TierName, Tier],
        metrics: Metrics,
        rrf_k: int = 60,
        depth: int = 100,
        timeout_s: float = 5.0,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        self._embedder = embedder
        self._analyzer = analyzer
        self._tiers = tiers
        self._metrics = metrics
        self._rrf_k = rrf_k
        self._depth = depth
        self._timeout_s = timeout_s
        self._weights = dict(weights or {})

    async def search(self, params: SearchParams) -> SearchOutcome:
        if not params.query.strip():
            raise InvalidRequest("query must not be empty")
        started = time.perf_counter()
        deadline = time.monotonic() + self._timeout_s
        timings: dict[str, float] = {}

        with _timer(timings, "features"):
            route = choose_route(params)
            terms = self._analyzer.query_terms(params.query) if "lexical" in params.legs else []
        with _timer(timings, "embed"):
            vector = None
            if "dense" in params.legs:
                vector = (await self._embedder.embed([params.query]))[0]
        query = SearchQuery(
            text=params.query,
            terms=terms,
            vector=vector,
            filters=route.filters,
            k=params.depth or max(params.top_k, self._depth),
            legs=params.legs,
        )
        retrieved = await retrieve(self._tiers, route.tiers, query, deadline=deadline)
        timings.update(retrieved.timings_ms)
        with _timer(timings, "fuse"):
            hits = rrf(retrieved.legs, k=self._rrf_k, weights=self._weights, limit=params.top_k)
        timings["total"] = (time.perf_counter() - started) * 1000
        self._metrics.observe_search(route.tiers, timings, retrieved.unavailable)
        log.info(
            "search request_id=%s route=%s tiers=%s hits=%d unavailable=%s total_ms=%.1f",
            params.request_id,
            params.route,
            ",".join(route.tiers),
            len(hits),
            ",".join(retrieved.unavailable) or "-",
            timings["total"],
        )
        return SearchOutcome(hits, route, timings, retrieved.unavailable, params.request_id)


@contextmanager
def _timer(timings: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = (time.perf_counter() - started) * 1000


def hits_by_doc(hits: Sequence[Hit]) -> list[str]:
    """Document ids in first-hit order (a document ranks where its best chunk ranks)."""
    return list(dict.fromkeys(h.doc_id for h in hits))
