"""The search flow, top to bottom: features → route → embed → retrieve (cascade) → fuse → hydrate
→ rerank.

Answers (rag_router/answer/flow.py: prompt compiler, LLM) are built on top of it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from indexers.embed.embedder import AsyncEmbedder
from indexers.records import TierName, Vector
from indexers.text.lexical import Analyzer
from indexers.tiers.base import SearchTier
from indexers.tiers.query import LEGS, Filters, Leg, SearchQuery
from rag_router.errors import BackendUnavailable, InvalidRequest
from rag_router.metrics import Metrics
from rag_router.search.features import extract
from rag_router.search.filters import filters_to_json
from rag_router.search.floor import Floor, Relevance, Sizes
from rag_router.search.fuse import FusionName, Hit, fuse
from rag_router.search.named import Missing, check_route
from rag_router.search.relax import Run, retrieve_routed
from rag_router.search.rerank import Rerank, precise
from rag_router.search.retrieve import Retrieved, hydrate
from rag_router.search.route import Policy, Route, RouteName, plan
from rag_router.search.soft import rank_undated_after
from rag_router.search.spaces import Spaces
from rag_router.search.versions import EXTRA_CANDIDATES, prefer_version

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SearchParams:
    query: str
    top_k: int = 10
    route: RouteName = "auto"
    # Required, and with it the tenant (``Filters.tenant`` has no default): a search cannot
    # forget whose documents it may see. The API sets it in one place (``api/deps.tenant``).
    filters: Filters = field(kw_only=True)
    legs: tuple[Leg, ...] = LEGS
    depth: int | None = None  # candidates per leg; default max(top_k, settings depth)
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # A time.monotonic() instant set once per request (an answer sets it for its search and its
    # LLM call); every stage takes what is left of it. None: now + the search timeout.
    deadline: float | None = None
    rerank: bool = True  # False: the fused order (the stage runs only where the service has one)
    # What an earlier question of the conversation gave this one (``search.followup``), shown in
    # the route's features; None: the query is the question as asked.
    carried: dict[str, Any] | None = None


@dataclass(slots=True, kw_only=True)
class SearchOutcome:
    hits: list[Hit]
    route: Route
    tiers: list[TierName]  # the tiers actually searched
    filters: Filters  # the filters actually applied
    reasons: list[str]
    timings_ms: dict[str, float]
    unavailable: list[str]
    request_id: str
    relevance: Relevance | None = None  # per hit, whether it cleared the relevance floor
    missing: Missing | None = None  # the clause the question named is not stored (``search.named``)
    evidence: dict[str, float] = field(default_factory=dict)  # sentence → evidence (answer.decide)
    asked: list[bool] = field(default_factory=list)  # per hit: the clause the question named (first)
    lead: str | None = None  # the sentence whose evidence answered (answer.decide)
    carried: dict[str, Any] | None = None  # SearchParams.carried

    @property
    def degraded(self) -> bool:
        return bool(self.unavailable)

    def route_json(self) -> dict[str, Any]:
        return {
            "tiers": list(self.tiers),
            "reason": "; ".join(self.reasons),
            "features": {
                **(self.route.features.to_json() if self.route.features else {}),
                **({"carried": self.carried} if self.carried else {}),
            },
            "filters": filters_to_json(self.filters),
            **({"missing": self.missing.to_json()} if self.missing else {}),
        }


class Searcher:
    """Answers ``/v1/search``: owns no clients, only uses the ones it is given."""

    def __init__(
        self,
        *,
        embedder: AsyncEmbedder,
        analyzer: Analyzer,
        tiers: Mapping[TierName, SearchTier],
        metrics: Metrics,
        policy: Policy,
        domains: Mapping[str, list[str]] | None = None,
        hot_window_days: int = 365,
        today: Callable[[], dt.date] = dt.date.today,
        rrf_k: int = 60,
        depth: int = 100,
        timeout_s: float = 5.0,
        weights: Mapping[str, float] | None = None,
        fusion: FusionName = "dbsf",
        languages: frozenset[str] | None = None,
        floor: Floor | None = None,
        spaces: frozenset[str] | None = None,
        rerank: Rerank | None = None,
    ) -> None:
        self._embedder = embedder
        self._analyzer = analyzer
        self._tiers = tiers
        self._metrics = metrics
        self._policy = policy
        self._domains = dict(domains or {})
        self._hot_window_days = hot_window_days
        self._today = today
        self._rrf_k = rrf_k
        self._depth = depth
        self._timeout_s = timeout_s
        self._weights = dict(weights or {})
        self._fusion: FusionName = fusion
        self._languages = languages  # the embedder's; None: any
        self._floor = floor  # None: every hit counts as relevant
        self._spaces = Spaces(spaces)  # a split embedder's second model's languages (None: one model)
        self._sizes = Sizes(tiers)  # chunks per tier: the floor's lexical IDF bound
        self.rerank = rerank  # None: the fused order stands (set once the services are built)

    @property
    def spaces(self) -> Spaces:
        return self._spaces

    def route(self, params: SearchParams) -> Route:
        today = self._today()
        features = extract(params.query, today=today, domains=self._domains)
        return plan(
            features,
            params.route,
            params.filters,
            policy=self._policy,
            today=today,
            hot_window_days=self._hot_window_days,
        )

    async def search(self, params: SearchParams) -> SearchOutcome:
        if not params.query.strip():
            raise InvalidRequest("query must not be empty")
        if self._spaces.split and not self._embedder.loaded and "dense" in params.legs:  # before the clock
            searched = self.route(params).searched or params.query
            try:
                if await self._embedder.load_for(searched):
                    log.info("search request_id=%s: loaded the model for its language", params.request_id)
            except Exception as exc:  # the embedding below fails too: the lexical leg answers
                log.warning("search request_id=%s: its model did not load (%s)", params.request_id, exc)
        started = time.perf_counter()
        deadline = time.monotonic() + self._timeout_s
        if params.deadline is not None:
            deadline = min(deadline, params.deadline)
        timings: dict[str, float] = {}

        with _timer(timings, "features"):
            route = self.route(params)
            params = dataclasses.replace(params, query=route.searched or params.query)  # no instructions
            foreign, language_reason = self._language_weights(route)
            terms = self._analyzer.query_terms(params.query) if "lexical" in params.legs else []
        weights = {**self._weights, **route.weights, **foreign}
        timings["embed"] = 0.0
        run, embedder_down = await self._run(
            params, route, terms, weights, deadline, timings, foreign=bool(foreign)
        )
        timings.update(run.retrieved.timings_ms)
        if embedder_down:
            run.reasons.append(embedder_down)
            run.retrieved.unavailable.append("embedder")
        with _timer(timings, "fuse"):
            version = route.features.version if route.features else None
            limit = params.top_k + (EXTRA_CANDIDATES if version else 0)
            rerank = self.rerank if params.rerank and not precise(route) else None
            limit = max(limit, rerank.depth) if rerank is not None else limit
            fused = fuse(self._fusion, run.retrieved.legs, k=self._rrf_k, weights=weights, limit=limit)
        run.reasons.extend(r for r in (language_reason, self._fusion_reason(run.retrieved, weights)) if r)
        if rerank is None and self.rerank is not None and params.rerank:
            run.reasons.append("no rerank: a clause, identifier or quoted phrase is matched by its words")
        if self._floor is not None and self._spaces.is_second(params.query) and self._floor.second > 1:
            run.reasons.append("relevance judged by the lexical leg: the second model has no floor")
        with _timer(timings, "fetch"):
            hits, failed = await hydrate(self._tiers, fused, deadline)
        run.retrieved.unavailable.extend(t for t in failed if t not in run.retrieved.unavailable)
        if rerank is not None:
            with _timer(timings, "rerank"):
                hits, why = await rerank.apply(params.query, hits, deadline)
            run.reasons.extend([why] if why else [])
        hits = rank_undated_after(hits, run.filters, self._policy.undated_factor, run.reasons)
        hits = prefer_version(hits, version, run.reasons)[: params.top_k]
        args = (self._tiers, self._analyzer, self._policy, deadline)
        check = await check_route(params.query, route, hits, *args)  # the clause named first, or missing
        hits = check.hits
        if check.missing is not None:
            run.reasons.append(check.missing.reason())
        answered = [t for t in run.tiers if t not in run.retrieved.unavailable]
        sizes = await self._sizes.get(answered) if self._floor else {}
        timings["total"] = (time.perf_counter() - started) * 1000
        self._metrics.observe_search(run.tiers, timings, run.retrieved.unavailable)
        log.info(
            "search request_id=%s route=%s tiers=%s hits=%d unavailable=%s total_ms=%.1f reason=%r",
            params.request_id,
            params.route,
            ",".join(run.tiers),
            len(hits),
            ",".join(run.retrieved.unavailable) or "-",
            timings["total"],
            "; ".join(run.reasons),
        )
        relevance = self._judge(hits, weights, terms, sizes, params.query, check.asked)
        if relevance is not None and (check.missing is not None or any(check.asked)):
            # the clause asked for is the answer's only source; another clause never is
            relevance = dataclasses.replace(relevance, marks=list(check.asked))
        return SearchOutcome(
            hits=hits,
            route=route,
            tiers=run.tiers,
            filters=run.filters,
            reasons=run.reasons,
            timings_ms=timings,
            unavailable=run.retrieved.unavailable,
            request_id=params.request_id,
            relevance=relevance,
            missing=check.missing,
            asked=check.asked,
            carried=params.carried,
        )

    async def _run(
        self,
        params: SearchParams,
        route: Route,
        terms: list[str],
        weights: Mapping[str, float],
        deadline: float,
        timings: dict[str, float],
        *,
        foreign: bool,
    ) -> tuple[Run, str]:
        """The routed retrieval, and why the embedder is missing from it ("" when it is not).

        A dense leg of weight 0 only fills in below every lexical hit (``fuse``): the query is
        then embedded only when those are too few for ``top_k`` or the ladder had to relax (a
        Chinese query to the English-only model: its embedding was most of its time). The
        fused ranking is the same; the cascade's threshold reads the dense score, so it embeds."""
        # the cascade's threshold is a cosine of the primary model: another model's cannot judge it
        trust = not foreign and not self._spaces.is_second(params.query)
        lazy = (
            "dense" in params.legs
            and "lexical" in params.legs
            and weights.get("dense", 1.0) == 0
            and (foreign or not route.cascade)
        )
        if not lazy:
            query, down = await self._with_vector(
                params, self._query(params, route, terms, params.legs), deadline, timings
            )
            return await self._retrieve(route, query, deadline, trust_dense=trust), down
        lexical = tuple(leg for leg in params.legs if leg != "dense")
        run = await self._retrieve(
            route, self._query(params, route, terms, lexical), deadline, trust_dense=trust
        )
        if not run.relaxed and run.distinct >= params.top_k:
            run.reasons.append("dense weight 0 and enough lexical hits: the query was not embedded")
            return run, ""
        query, down = await self._with_vector(
            params, self._query(params, route, terms, params.legs), deadline, timings
        )
        if "dense" not in query.legs:  # the embedder failed: the lexical run stands
            return run, down
        return await self._retrieve(route, query, deadline, trust_dense=trust), down

    def _query(
        self, params: SearchParams, route: Route, terms: list[str], legs: tuple[Leg, ...]
    ) -> SearchQuery:
        return SearchQuery(
            text=params.query,
            terms=terms,
            vector=None,
            filters=route.filters,
            k=params.depth or max(params.top_k, self._depth),
            legs=legs,
            payload=False,  # query, then fetch: only the fused top-k are hydrated
            space=self._spaces.of(params.query),
        )

    async def _with_vector(
        self,
        params: SearchParams,
        query: SearchQuery,
        deadline: float,
        timings: dict[str, float],
    ) -> tuple[SearchQuery, str]:
        """``query`` with the dense leg's vector; without the dense leg, and why, when the
        embedder failed (the lexical leg still answers)."""
        legs = query.legs
        if "dense" not in legs:
            return query, ""
        with _timer(timings, "embed"):
            vector = await self._embed(params, deadline)
        if vector is not None:
            cross = await self._spaces.cross(self._embedder, params.query)  # English → Chinese chunks
            return dataclasses.replace(query, vector=vector, cross=cross), ""
        if legs == ("dense",):
            raise BackendUnavailable("the embedder is unavailable and only the dense leg was asked for")
        lexical = tuple(leg for leg in legs if leg != "dense")
        return dataclasses.replace(query, legs=lexical), "the embedder did not answer: lexical leg only"

    async def _retrieve(self, route: Route, query: SearchQuery, deadline: float, *, trust_dense: bool) -> Run:
        # The legs stop early enough to leave the fetch of the kept hits its share (a fifth of
        # what is left, at most 1 s): a tier that runs to the deadline must not cost the other
        # tier's hits, which would otherwise arrive with no time left to fetch them.
        left = max(deadline - time.monotonic(), 0.0)
        legs_deadline = deadline - min(left / 5, 1.0)
        return await retrieve_routed(
            self._tiers,
            route,
            query,
            policy=self._policy,
            deadline=legs_deadline,
            trust_dense=trust_dense,
            widen_space=self._spaces.is_second(query.text),
        )

    def _judge(
        self,
        hits: list[Hit],
        weights: Mapping[str, float],
        terms: list[str],
        sizes: Mapping[str, int],
        query: str,
        asked: list[bool],
    ) -> Relevance | None:
        if self._floor is None:
            return None
        second = self._spaces.is_second(query) and self._floor.second <= 1  # e5's own floor judges
        judged = self._spaces.judged(weights, query, self._floor)
        return self._floor.judge(hits, judged, terms, sizes=sizes, asked=asked, second=second)

    async def _embed(self, params: SearchParams, deadline: float) -> Vector | None:
        """The query's vector, waiting for the micro-batcher no longer than half the time left
        (the lexical leg needs the rest if it has to answer alone); None when the embedder failed."""
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.0) / 2):
                return await self._embedder.embed_query(params.query)
        except Exception as exc:  # a timeout, or the model failed: degrade to the lexical leg
            log.warning("search request_id=%s: embedder failed (%s)", params.request_id, type(exc).__name__)
            return None

    def _language_weights(self, route: Route) -> tuple[dict[str, float], str]:
        """Leg weights for a query the embedder cannot read: its dense ranking is noise, so it
        gets the policy's ``foreign_dense_weight`` (0: it only fills in below every lexical
        hit, which keeps a clause filter's documents findable when no word matches)."""
        language = route.features.language if route.features else None
        if self._languages is None or language is None or language in self._languages:
            return {}, ""
        weight = self._policy.foreign_dense_weight
        reads = ", ".join(sorted(self._languages))
        return {
            "dense": weight
        }, f"dense weight {weight:g}: the embedder reads {reads}, the query is {language}"

    def _fusion_reason(self, retrieved: Retrieved, weights: Mapping[str, float]) -> str:
        kinds = sorted({leg.rsplit(".", 1)[-1] for leg in retrieved.legs})
        if len(kinds) < 2:  # the dense leg was not run (weight 0) or a single leg was asked for
            return f"{kinds[0]} leg only, no fusion" if kinds else ""
        shown = ", ".join(f"{kind} {weights.get(kind, 1.0):g}" for kind in kinds)
        method = f"rrf k={self._rrf_k}" if self._fusion == "rrf" else self._fusion
        return f"fusion {method} ({shown})"


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
