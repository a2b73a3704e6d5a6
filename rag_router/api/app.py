"""``create_app(settings)``: the app factory; the lifespan owns every client and engine."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline

from indexers.embed.embedder import Embedder
from rag_router import __version__, web
from rag_router.api import errors, mcp_server
from rag_router.api.context import RequestContext
from rag_router.api.keys import KeyRing
from rag_router.api.limits import BodyLimit, InFlightLimit
from rag_router.api.routes import ROUTERS, answer, chat, documents, health, jobs, retier, search
from rag_router.services import build_services
from rag_router.settings import Settings

log = logging.getLogger(__name__)

# Each router's group in /docs, by the router's identity (routers are not hashable); a router
# missing here fails at startup, so nothing lands in Swagger's "default" group.
TAGS: dict[int, str] = {
    id(search.router): "search",
    id(answer.router): "answer",
    id(chat.router): "chat",
    id(documents.router): "documents",
    id(jobs.router): "ingestion jobs",
    id(health.router): "health",
    id(retier.router): "admin",
}
TAG_DOCS = [
    {"name": "search", "description": "Hybrid retrieval over the hot and cold tiers, routed."},
    {"name": "answer", "description": "A grounded answer with citations, as JSON or a stream."},
    {"name": "chat", "description": "OpenAI-compatible chat completions over the answer flow."},
    {"name": "documents", "description": "Add, list, read back and delete documents."},
    {"name": "ingestion jobs", "description": "Background ingestion: submit, upload, follow, cancel."},
    {"name": "health", "description": "Liveness, readiness and Prometheus metrics."},
    {"name": "admin", "description": "Maintenance: move aged documents to the cold tier."},
]


def operation_id(route: APIRoute) -> str:
    """The handler's name (``search``, ``get_document``): what a generated client calls it."""
    return route.name


def create_app(settings: Settings, *, embedder: Embedder | None = None, freeze_gc: bool = False) -> FastAPI:
    """The service. ``embedder`` may be injected (tests share one model across apps).

    ``freeze_gc`` (the server process): once started, everything alive (models, tokenizers,
    engines) moves to the collector's permanent generation, so later collections only walk
    what requests allocate (see ``rag_router.cli.serve``).
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.services = await build_services(settings, embedder)
        app.state.services.jobs.start()  # resumes jobs a previous process left unfinished
        if freeze_gc:
            gc.collect()
            gc.freeze()
        # not "ready" yet: uvicorn binds the socket after the lifespan starts (rag-router serve
        # says ready once it is bound; a port in use fails after this line)
        log.info("services open: data dir %s", settings.data_dir)
        try:
            async with mcp_sessions.run():
                yield
        finally:
            await app.state.services.close()

    # Swagger UI and ReDoc from assets the fastapi-offline package ships: FastAPI's own pages load
    # them from a CDN and are blank offline or behind a firewall.
    app = FastAPIOffline(
        title="rag-router",
        version=__version__,
        description="Hybrid RAG retrieval: hot and cold tiers, routing, fusion.",
        lifespan=lifespan,
        openapi_tags=TAG_DOCS,
        generate_unique_id_function=operation_id,
    )
    app.state.settings = settings
    app.state.keys = KeyRing(
        [k.get_secret_value() for k in settings.api_keys], settings.api_keys_file, settings.rate_limit
    )
    errors.install(app)
    for router in ROUTERS:
        app.include_router(router, tags=[TAGS[id(router)]])
    app.include_router(web.router)  # the page at / (not in the OpenAPI schema)
    mcp_sessions = mcp_server.mount(app)  # MCP tools at /mcp (not in the OpenAPI schema)

    def rejected() -> None:
        services = getattr(app.state, "services", None)
        if services is not None:
            services.metrics.rejected.inc()

    app.add_middleware(InFlightLimit, limit=settings.max_inflight, on_reject=rejected)
    app.add_middleware(  # inner: runs after the context below
        BodyLimit,
        max_bytes=settings.max_body_bytes,
        per_path={p: settings.ingest.max_job_bytes for p in ("/v1/ingest/jobs", "/v1/ingest/files")},
    )

    def observe(path: str, status: int, seconds: float) -> None:
        services = getattr(app.state, "services", None)
        if services is not None:
            services.metrics.requests.labels(route=path, status=str(status)).inc()
            services.metrics.request_seconds.labels(route=path).observe(seconds)

    app.add_middleware(RequestContext, observe=observe)  # outermost: 413s and 429s carry an id too

    return app
