"""The storage tiers the settings name, and their opening at a start.

A server engine where its URL is set (Qdrant, Elasticsearch), the embedded one otherwise (Qdrant
Edge; tantivy + FAISS over SQLite): no code change to switch. ``opened`` loads the embedding
model beside the tiers' opening when the index already exists.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import SecretStr

from indexers.embed.embedder import Embedder
from indexers.manifest import IndexManifest, IndexMismatch, check_manifest, stored_manifest
from indexers.records import TierName
from indexers.text.lexical import Analyzer
from indexers.tiers.base import Tier, TierUnavailable
from indexers.tiers.disk import DiskGuard
from indexers.tiers.local_cold import LocalColdTier
from indexers.tiers.qdrant_edge import QdrantEdgeTier
from rag_router.embedders import build_embedder
from rag_router.settings import Settings

log = logging.getLogger(__name__)


def disk_guard(settings: Settings) -> DiskGuard:
    """Writes refused while the data dir's file system is under ``storage.min_free_mb``."""
    return DiskGuard(settings.data_dir, settings.storage.min_free_mb * 2**20)


def build_tiers(settings: Settings, dim: int, analyzer: Analyzer) -> dict[TierName, Tier]:
    """Server engines where a URL is set, embedded engines otherwise; no code change to switch."""
    return {"hot": hot_tier(settings, dim, analyzer), "cold": cold_tier(settings, dim, analyzer)}


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def hot_tier(settings: Settings, dim: int, analyzer: Analyzer) -> Tier:
    """The hot tier the settings name (the Ray engine's workers open a server tier with it too)."""
    q = settings.qdrant
    if q.url:
        from qdrant_client import AsyncQdrantClient

        from indexers.tiers.qdrant_server import QdrantServerTier

        # no version probe in a background thread at construction; /readyz reports reachability
        client = AsyncQdrantClient(url=q.url, api_key=_secret(q.api_key), check_compatibility=False)
        return QdrantServerTier(
            client, collection=q.collection, dim=dim, analyzer=analyzer, hnsw_ef=q.hnsw_ef
        )
    return QdrantEdgeTier(
        settings.data_dir / "hot",
        dim=dim,
        analyzer=analyzer,
        indexing_threshold_kb=q.indexing_threshold_kb,
        hnsw_ef=q.hnsw_ef,
        fresh_limit=q.fresh_limit,
        compaction=q.compaction,
        nice=settings.thread_nice // 2,
        guard=disk_guard(settings),
    )


def cold_tier(settings: Settings, dim: int, analyzer: Analyzer) -> Tier:
    """The cold tier the settings name (the Ray engine's workers open a server tier with it too)."""
    e = settings.elastic
    if e.url:
        from elasticsearch import AsyncElasticsearch

        from indexers.tiers.elastic import ElasticTier

        auth: dict[str, Any] = {"api_key": _secret(e.api_key)} if e.api_key else {}
        if not e.api_key and e.username:
            auth = {"basic_auth": (e.username, _secret(e.password) or "")}
        if e.ca_certs:
            auth["ca_certs"] = e.ca_certs
        client = AsyncElasticsearch(e.url, **auth)
        return ElasticTier(client, index=e.index, dim=dim)
    return LocalColdTier(
        settings.data_dir / "cold",
        dim=dim,
        analyzer=analyzer,
        ivf_threshold=e.ivf_threshold,
        lexical_shards=e.lexical_shards,
        nice=settings.thread_nice // 2,
    )


async def opened(
    settings: Settings, embedder: Embedder | None, analyzer: Analyzer
) -> tuple[Embedder, dict[TierName, Tier]]:
    """The embedder and the opened tiers. On an existing index the model loads while the tiers
    open (its manifest gives their dimension): at 10M chunks each took seconds of ``serve``'s
    start, one after the other. The manifest is checked once the model is known."""
    stored = stored_manifest(settings.data_dir) if embedder is None else None
    if stored is None:
        embedder = embedder or build_embedder(settings)
        check_manifest(settings.data_dir, IndexManifest.of(embedder.model_name, embedder.dim))
        tiers = build_tiers(settings, embedder.dim, analyzer)
        await _open(tiers)
        return embedder, tiers
    loading = asyncio.create_task(asyncio.to_thread(build_embedder, settings))
    tiers = build_tiers(settings, stored.dim, analyzer)
    try:
        await _open(tiers)
    finally:
        loaded = await loading  # a model that fails to load fails the start, as before
    try:
        check_manifest(settings.data_dir, IndexManifest.of(loaded.model_name, loaded.dim))
    except IndexMismatch:
        await asyncio.gather(*(t.close() for t in tiers.values()), return_exceptions=True)
        raise
    return loaded, tiers


async def _open(tiers: dict[TierName, Tier]) -> None:
    """Every tier opened (and caught up after a crash), side by side; a server not up yet is
    logged and left to /readyz."""

    async def one(name: TierName, tier: Tier) -> None:
        try:
            await tier.ensure()
        except TierUnavailable as exc:  # a server not up yet: start anyway, /readyz says 503
            log.warning("%s tier (%s) unavailable at start: %s", name, tier.engine, exc)

    await asyncio.gather(*(one(name, tier) for name, tier in tiers.items()))
