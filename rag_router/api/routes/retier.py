"""``POST /v1/retier``: move documents past the hot window to the cold tier, in the server."""

from __future__ import annotations

from fastapi import APIRouter

from rag_router.api.deps import WRITE_RESPONSES, Svc, Tenant, Writable
from rag_router.api.schemas import RetierOut, RetierRequest

router = APIRouter()


@router.post("/v1/retier", response_model=RetierOut, responses=WRITE_RESPONSES, dependencies=[Writable])
async def retier(body: RetierRequest, svc: Svc, _: Tenant) -> RetierOut:
    """Copy → verify → delete, for every tenant (any valid key may ask); answered when done."""
    report = await svc.retier(dry_run=body.dry_run)
    return RetierOut(
        aged=report.aged, moved=report.moved, chunks=report.chunks, errors=report.errors, dry_run=body.dry_run
    )
