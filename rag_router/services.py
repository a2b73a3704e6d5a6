"""Builds every client and engine from Settings; the app's lifespan and the CLI own the result."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import yaml

from indexers.embed.base import PassEmbedder
from indexers.embed.cache import EmbeddingCache
from indexers.embed.embedder import (
    AsyncEmbedder,
    Embedder,
    model_languages,
)
from indexers.embed.split import SplitEmbedder
from indexers.ingest.jobs import JobRunner
from indexers.ingest.ledger_engines import open_ledger
from indexers.ingest.pipeline import Pipeline
from indexers.ingest.ray.pipeline import RayOptions, RayPipeline
from indexers.ingest.retier import RetierReport
from indexers.ingest.retier import retier as run_retier
from indexers.records import TierName
from indexers.text.chunk import Chunker
from indexers.text.lexical import Analyzer
from indexers.tiers.base import StoreTier, Tier, TierError
from indexers.tiers.disk import disk_full
from rag_router.answer.condense import Condenser
from rag_router.answer.evidence import SentenceFloor, SentenceScorer
from rag_router.answer.flow import Answerer
from rag_router.answer.llm import LLMClient
from rag_router.answer.llm_rerank import LLMReranker
from rag_router.embedders import build_embedder, query_models
from rag_router.errors import BackendUnavailable, InsufficientStorage, RagError
from rag_router.faults import Failpoints, FaultyEmbedder, FaultyTier
from rag_router.metrics import Metrics
from rag_router.search.floor import Floor
from rag_router.search.flow import Searcher
from rag_router.search.rerank import Rerank, Reranker, SentenceReranker
from rag_router.search.route import Policy
from rag_router.settings import PROMPTS, Settings, shared_store
from rag_router.stores import cold_tier, disk_guard, hot_tier, opened

log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class Services:
    settings: Settings
    embedder: Embedder
    analyzer: Analyzer
    tiers: dict[TierName, Tier]
    pipeline: Pipeline
    searcher: Searcher
    metrics: Metrics
    embed_worker: AsyncEmbedder
    jobs: JobRunner
    answerer: Answerer
    cache: EmbeddingCache | None = None
    retiering: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def retier(self, *, dry_run: bool = False) -> RetierReport:
        """Move documents past the hot window to the cold tier, in this process (one run at a time)."""
        async with self.retiering:
            return await run_retier(
                self.tiers["hot"],
                self.tiers["cold"],
                self.pipeline,
                hot_window_days=self.settings.tiers.hot_window_days,
                today=dt.date.today(),
                dry_run=dry_run,
                step_timeout_s=self.settings.ingest.batch_timeout_s,
            )

    async def close(self) -> None:
        await self.jobs.close()
        if self.answerer.llm is not None:
            await self.answerer.llm.close()
        for tier in self.tiers.values():
            await tier.close()
        self.embed_worker.close()
        if self.cache is not None:
            self.cache.close()


EngineError = TierError  # what a storage engine raises (the API answers it with ``service_error``)


def service_error(exc: BaseException) -> RagError | None:
    """A storage engine's failure as the service's error: out of disk space → 507 (the guard's
    refusal or a write that failed for lack of space), any other engine failure → 503."""
    if disk_full(exc):
        return InsufficientStorage(str(exc))
    if isinstance(exc, TierError):
        return BackendUnavailable(f"a storage engine failed: {exc}")
    return None


def build_pipeline(
    settings: Settings,
    embedder: Embedder,
    embed_worker: AsyncEmbedder,
    tiers: dict[TierName, Tier],
    cache: EmbeddingCache | None,
) -> Pipeline:
    return Pipeline(
        embedder=embed_worker,
        chunker=Chunker(
            embedder.count_tokens,
            max_tokens=settings.chunk.max_tokens,
            overlap_tokens=settings.chunk.overlap_tokens,
        ),
        tiers=tiers,
        hot_window_days=settings.tiers.hot_window_days,
        batch_chunks=settings.ingest.batch_chunks,
        queue_batches=settings.ingest.queue_batches,
        cache=cache,
        guard=disk_guard(settings),
        batch_timeout_s=settings.ingest.batch_timeout_s,
        sentences=settings.rerank.model == "sentences" and settings.rerank.at_ingest,
    )


def build_ray_pipeline(settings: Settings, services: Services, options: RayOptions) -> RayPipeline:
    """``rag-router ingest --engine ray``: the same chunker, model and tiers, on a Ray cluster."""
    embedder = services.embedder
    if not isinstance(embedder, PassEmbedder):
        raise ValueError(f"--engine ray needs a torch or ONNX embedder, not {type(embedder).__name__}")
    dim, analyzer = embedder.dim, services.analyzer
    servers: dict[TierName, Callable[[], StoreTier]] = {}  # the workers open these themselves
    if settings.qdrant.url:
        servers["hot"] = functools.partial(hot_tier, settings, dim, analyzer)
    if settings.elastic.url:
        servers["cold"] = functools.partial(cold_tier, settings, dim, analyzer)
    return RayPipeline(
        embedder=embedder,
        make_embedder=functools.partial(_pass_embedder, settings),
        chunker=Chunker(
            embedder.count_tokens,
            max_tokens=settings.chunk.max_tokens,
            overlap_tokens=settings.chunk.overlap_tokens,
        ),
        analyzer=services.analyzer,
        tiers=services.tiers,
        hot_window_days=settings.tiers.hot_window_days,
        options=options,
        servers=servers,
    )


def _pass_embedder(settings: Settings) -> PassEmbedder:
    """An embedding actor's model, built from the settings where it runs (a GPU there: torch)."""
    embedder = build_embedder(settings)
    assert isinstance(embedder, PassEmbedder)
    return embedder


def _measured(embedder: Embedder) -> bool:
    """Whether the sentence floors were measured on this embedder's models (MiniLM, and e5 for
    Chinese beside it): another model's cosines mean other things."""
    return embedder.model_name.startswith("all-MiniLM-L6-v2")


def build_searcher(
    settings: Settings,
    embedder: Embedder,
    embed_worker: AsyncEmbedder,
    analyzer: Analyzer,
    tiers: dict[TierName, Tier],
    metrics: Metrics,
) -> Searcher:
    r = settings.retrieval
    domains = yaml.safe_load((PROMPTS / "domains.yaml").read_text(encoding="utf-8"))
    return Searcher(
        embedder=embed_worker,
        analyzer=analyzer,
        tiers=tiers,
        metrics=metrics,
        policy=Policy.load(),
        domains=domains,
        hot_window_days=settings.tiers.hot_window_days,
        rrf_k=r.rrf_k,
        depth=r.depth,
        timeout_s=r.timeout_s,
        weights={"dense": r.dense_weight, "lexical": r.lexical_weight},
        fusion=r.fusion,
        languages=None
        if isinstance(embedder, SplitEmbedder) and settings.embedding.languages is None
        else model_languages(embedder.model_name, settings.embedding.languages),
        spaces=embedder.languages if isinstance(embedder, SplitEmbedder) else None,
        floor=Floor(r.floor_dense, r.floor_lexical, r.floor_lexical_alone, r.floor_dense_second),
    )


async def build_services(settings: Settings, embedder: Embedder | None = None) -> Services:
    """Everything the service needs, with the tiers opened (and caught up after a crash)."""
    analyzer = Analyzer()
    embedder, tiers = await opened(settings, embedder, analyzer)
    metrics = Metrics()
    embed_worker = build_embed_worker(settings, embedder, metrics)
    if settings.faults_file is not None:  # the fault matrix's failpoints (rag_router/faults.py)
        points = Failpoints(settings.faults_file)
        tiers = {name: cast(Tier, FaultyTier(t, name, points)) for name, t in tiers.items()}
        embed_worker = FaultyEmbedder(embed_worker, points)
    cache = build_embed_cache(settings, embedder)
    pipeline = build_pipeline(settings, embedder, embed_worker, tiers, cache)
    llm = build_llm(settings, metrics)
    searcher = build_searcher(settings, embedder, embed_worker, analyzer, tiers, metrics)
    searcher.rerank = build_rerank(settings, embed_worker, searcher, cache, llm)
    jobs = JobRunner(
        open_ledger(settings.jobs.url, settings.data_dir),
        pipeline,
        on_batch=metrics.count_ingest,
        lease_s=settings.jobs.lease_s,
        poll_s=settings.jobs.poll_s,
        recover=not shared_store(settings) and not settings.jobs.url,
        guard=disk_guard(settings),
    )
    answerer = Answerer(
        searcher=searcher,
        analyzer=analyzer,
        count_tokens=embedder.count_tokens,
        llm=llm,
        timeout_s=settings.llm.timeout_s,
        context_tokens=settings.llm.context_tokens,
        max_tokens=settings.llm.max_tokens,
        source_tokens=settings.llm.source_tokens,
        scorer=SentenceScorer(embed_worker, searcher.spaces) if _measured(embedder) else None,
        sentence_floor=SentenceFloor(
            settings.retrieval.floor_sentence, settings.retrieval.floor_sentence_second
        ),
        condenser=Condenser(llm) if llm is not None and settings.llm.condense else None,
    )
    return Services(
        settings=settings,
        embedder=embedder,
        analyzer=analyzer,
        tiers=tiers,
        pipeline=pipeline,
        searcher=searcher,
        metrics=metrics,
        embed_worker=embed_worker,
        jobs=jobs,
        answerer=answerer,
        cache=cache,
    )


def build_embed_worker(settings: Settings, embedder: Embedder, metrics: Metrics) -> AsyncEmbedder:
    """The embedder's two lanes: micro-batched queries and bulk ingestion."""
    e = settings.embedding
    lane, solo = query_models(embedder, e.query_workers)
    return AsyncEmbedder(
        embedder,
        query_models=lane,
        query_solo=solo,
        query_batch=e.query_batch,
        query_wait_s=e.query_wait_ms / 1000,
        query_cache=e.query_cache,
        observe=metrics.observe_query_batch,
        nice=settings.thread_nice,
    )


def build_embed_cache(settings: Settings, embedder: Embedder) -> EmbeddingCache | None:
    if not settings.ingest.embed_cache_entries:
        return None
    return EmbeddingCache(
        settings.data_dir / "embed-cache.sqlite",
        model=embedder.model_name,
        dim=embedder.dim,
        max_entries=settings.ingest.embed_cache_entries,
    )


def build_rerank(
    settings: Settings,
    embed_worker: AsyncEmbedder,
    searcher: Searcher,
    cache: EmbeddingCache | None,
    llm: LLMClient | None,
) -> Rerank | None:
    """The rerank stage ``RAG_RERANK__MODEL`` names; None when it is "none"."""
    r = settings.rerank
    reranker: Reranker
    if r.model == "none":
        return None
    if r.model == "sentences":
        reranker = SentenceReranker(embed_worker, searcher.spaces, cache)
    elif r.model == "llm":
        if llm is None:
            raise ValueError("RAG_RERANK__MODEL=llm needs an LLM server: set RAG_LLM__BASE_URL")
        reranker = LLMReranker(llm)
    else:
        from rag_router.search.cross_encoder import CrossEncoderReranker  # torch, when asked for

        reranker = CrossEncoderReranker(r.model, device=settings.embedding.device)
    return Rerank(reranker, depth=r.depth, weight=r.weight, budget_s=r.timeout_s)


def build_llm(settings: Settings, metrics: Metrics) -> LLMClient | None:
    s = settings.llm
    if not s.base_url:
        return None
    key = s.api_key.get_secret_value() if s.api_key else None
    return LLMClient(s.base_url, s.model, api_key=key, max_retries=s.max_retries, metrics=metrics)
