"""``/v1/ingest/jobs``: background batch ingestion (the durable job ledger), progress, cancelling."""

from __future__ import annotations

from fastapi import APIRouter

from indexers.ingest.jobs import JobState
from rag_router.api.deps import ERROR_RESPONSES, Svc, Tenant, documents_of
from rag_router.api.schemas import DocumentsRequest, JobCreated, JobError, JobOut
from rag_router.errors import NotFound

router = APIRouter()


@router.post("/v1/ingest/jobs", status_code=202, response_model=JobCreated, responses=ERROR_RESPONSES)
async def create_job(body: DocumentsRequest, svc: Svc, tenant: Tenant) -> JobCreated:
    """Accepted once the job and all its documents are durably in the job ledger."""
    return JobCreated(job_id=await svc.jobs.submit(tenant, body.tier, documents_of(body, tenant)))


def _job_out(state: JobState | None, tenant: str, job_id: str) -> JobOut:
    if state is None or state.tenant != tenant:
        raise NotFound(f"ingest job {job_id!r} not found")
    return JobOut(
        job_id=state.id,
        status=state.status,
        total=state.total,
        done=state.done,
        failed=state.failed,
        errors=[JobError(**e) for e in state.errors],
        chunks_per_s=round(state.chunks_per_s, 2),
        eta_s=None if state.eta_s is None else round(state.eta_s, 1),
        created_at=state.created,
        updated_at=state.updated,
    )


@router.get("/v1/ingest/jobs/{job_id}", response_model=JobOut, responses=ERROR_RESPONSES)
async def get_job(job_id: str, svc: Svc, tenant: Tenant) -> JobOut:
    return _job_out(await svc.jobs.get(job_id), tenant, job_id)


@router.delete("/v1/ingest/jobs/{job_id}", response_model=JobOut, responses=ERROR_RESPONSES)
async def cancel_job(job_id: str, svc: Svc, tenant: Tenant) -> JobOut:
    """Cancels a queued or running job (a running one stops between batches); finished ones stay."""
    _job_out(await svc.jobs.get(job_id), tenant, job_id)
    return _job_out(await svc.jobs.cancel(job_id), tenant, job_id)
