"""One router per resource; ``ROUTERS`` is what the app mounts, in this order."""

from __future__ import annotations

from fastapi import APIRouter

from rag_router.api.routes import answer, chat, documents, health, jobs, retier, search

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    search.router,
    documents.router,
    jobs.router,
    retier.router,
    answer.router,
    chat.router,
)
