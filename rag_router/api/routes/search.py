"""``POST /v1/search``: the search flow over HTTP."""

from __future__ import annotations

from fastapi import APIRouter, Request

from rag_router.api.deps import ERROR_RESPONSES, Svc, Tenant, search_params
from rag_router.api.schemas import SearchRequest, SearchResponse

router = APIRouter()


@router.post("/v1/search", response_model=SearchResponse, responses=ERROR_RESPONSES)
async def search(body: SearchRequest, request: Request, svc: Svc, tenant: Tenant) -> SearchResponse:
    return SearchResponse.from_outcome(await svc.searcher.search(search_params(body, request, tenant)))
