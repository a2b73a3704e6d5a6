"""``/v1/ingest/jobs`` and ``/v1/ingest/files``: background ingestion through the durable job ledger.

A job is accepted (202) once it and all its documents are in the ledger; its progress is read
with GET, followed live with ``…/events`` (SSE), and stopped with DELETE, on any replica.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from sse_starlette import EventSourceResponse, ServerSentEvent

from indexers.ingest.ledger import JobState
from indexers.ingest.load import FieldMap, LoadFailure, LoadOptions, SeenIds, load_sourced
from indexers.records import Document
from rag_router.api.deps import ERROR_RESPONSES, WRITE_RESPONSES, Svc, Tenant, Writable, documents_of
from rag_router.api.schemas import (
    DocumentsRequest,
    FileResult,
    FilesAccepted,
    JobCreated,
    JobError,
    JobOut,
    JobsOut,
)
from rag_router.errors import InvalidRequest, NotFound, RateLimited
from rag_router.services import Services

router = APIRouter()

EVENTS_INTERVAL_S = 0.5  # how often the event stream reads the ledger
_COPY_CHUNK = 1024 * 1024


async def room_for_a_job(svc: Svc, tenant: Tenant) -> None:
    """429 while the tenant has ``jobs.max_pending`` jobs queued or running (a new job's dependency)."""
    limit = svc.settings.jobs.max_pending
    pending = [j for j in await svc.jobs.jobs(tenant, limit=limit + 1) if j.status in ("queued", "running")]
    if len(pending) >= limit:
        raise RateLimited(f"{len(pending)} of this tenant's jobs are queued or running; at most {limit}", 5)


@router.post(
    "/v1/ingest/jobs",
    status_code=202,
    response_model=JobCreated,
    responses=WRITE_RESPONSES,
    dependencies=[Writable, Depends(room_for_a_job)],
)
async def create_job(body: DocumentsRequest, svc: Svc, tenant: Tenant) -> JobCreated:
    """Accepted once the job and all its documents are durably in the job ledger."""
    return JobCreated(job_id=await svc.jobs.submit(tenant, body.tier, documents_of(body, tenant)))


@router.post(
    "/v1/ingest/files",
    status_code=202,
    response_model=FilesAccepted,
    responses=WRITE_RESPONSES,
    dependencies=[Writable, Depends(room_for_a_job)],
)
async def upload_files(
    request: Request,
    files: Annotated[list[UploadFile], File(description="md, html, pdf, txt, jsonl, BEIR corpus.jsonl[.gz]")],
    svc: Svc,
    tenant: Tenant,
    tier: Annotated[Literal["auto", "hot", "cold"], Form()] = "auto",
    id_field: Annotated[str, Form(min_length=1, max_length=64, description="JSONL key of the id")] = "id",
    text_field: Annotated[
        str, Form(min_length=1, max_length=64, description="JSONL key of the text")
    ] = "text",
    title_field: Annotated[
        str, Form(min_length=1, max_length=64, description="JSONL key of the title")
    ] = "title",
    as_tenant: Annotated[
        str | None,
        Form(
            alias="tenant",
            min_length=1,
            max_length=128,
            description="the documents' tenant; only where the server has no API keys (else the key's)",
        ),
    ] = None,
) -> FilesAccepted:
    """Files → one ingestion job. A file's name (a relative path) becomes its document id, as the CLI's
    folder ingest names them; a file that cannot be read is listed with the reason and skipped."""
    owner = tenant  # the job is the caller's; its documents may be another tenant's (no keys only)
    if as_tenant is not None and as_tenant != tenant:
        if request.app.state.keys.enabled:
            raise InvalidRequest("tenant: with API keys the tenant is the key's; leave the field out")
        tenant = as_tenant
    options = LoadOptions(
        tenant=tenant,
        fields=FieldMap(id=id_field, text=text_field, title=title_field),
        max_bytes=int(svc.settings.ingest.max_file_mb * 1024 * 1024),
    )
    with tempfile.TemporaryDirectory(prefix="rag-upload-") as folder:
        docs, results = await _read_uploads(files, Path(folder), options)
        if not docs:
            failures = [{"id": f.id, "error": f.error} for r in results for f in r.failures]
            reasons = "; ".join(f"{f['id']}: {f['error']}" for f in failures) or "no files"
            raise InvalidRequest(f"no documents could be read from the upload ({reasons})", failures)
        job_id = await svc.jobs.submit(owner, tier, docs)
    return FilesAccepted(job_id=job_id, files=results)


async def _read_uploads(
    files: list[UploadFile], folder: Path, options: LoadOptions
) -> tuple[list[Document], list[FileResult]]:
    """Each file's documents and a result per file; an id read twice in one upload fails the
    second copy (as a CLI ingest in process does), never replacing the first in silence."""
    docs: list[Document] = []
    results: list[FileResult] = []
    seen = SeenIds()
    for upload in files:
        name = _safe_name(upload.filename or "")
        if name is None:
            results.append(_unread(upload.filename or "", "a file needs a plain name"))
            continue
        path = folder / name
        try:
            await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
            with path.open("wb") as out:
                while block := await upload.read(_COPY_CHUNK):
                    await asyncio.to_thread(out.write, block)
        except OSError as exc:  # a name too long, or one that is also a folder in this upload
            results.append(_unread(name, f"cannot store the file: {exc.strerror}"))
            continue
        read = await asyncio.to_thread(_load, path, folder, options, seen)
        found = [d for d in read if isinstance(d, Document)]
        failures = [_named(f, path, name) for f in read if isinstance(f, LoadFailure)]
        error = "; ".join(f"{f.id}: {f.error}" for f in failures[:5]) + (" …" if len(failures) > 5 else "")
        results.append(FileResult(name=name, documents=len(found), error=error or None, failures=failures))
        docs.extend(found)
        path.unlink()
    return docs, results


def _unread(name: str, error: str) -> FileResult:
    return FileResult(name=name, documents=0, error=error, failures=[JobError(id=name, error=error)])


def _load(path: Path, folder: Path, options: LoadOptions, seen: SeenIds) -> list[Document | LoadFailure]:
    return [seen.first(item, source) for source, item in load_sourced(path, folder, options)]


def _named(failure: LoadFailure, path: Path, name: str) -> JobError:
    """A failure where the client named it (``name``, ``name:line``), not in the upload folder."""
    source = failure.source
    where = name + source[len(str(path)) :] if source.startswith(str(path)) else source
    return JobError(id=where, error=failure.reason)


def _safe_name(name: str) -> str | None:
    """The client's relative path, without anything that could leave the upload folder."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", ".", "..", "/")]
    if not parts or any(p.startswith(".") or "\x00" in p for p in parts):
        return None
    return "/".join(parts)


def _job_out(state: JobState | None, tenant: str, job_id: str) -> JobOut:
    if state is None or state.tenant != tenant:
        raise NotFound(f"ingest job {job_id!r} not found")
    return JobOut.of(state)


@router.get("/v1/ingest/jobs", response_model=JobsOut, responses=ERROR_RESPONSES)
async def list_jobs(svc: Svc, tenant: Tenant) -> JobsOut:
    """The tenant's latest jobs, newest first."""
    return JobsOut(jobs=[JobOut.of(s) for s in await svc.jobs.jobs(tenant)])


@router.get("/v1/ingest/jobs/{job_id}", response_model=JobOut, responses=ERROR_RESPONSES)
async def get_job(job_id: str, svc: Svc, tenant: Tenant) -> JobOut:
    return _job_out(await svc.jobs.get(job_id), tenant, job_id)


@router.get("/v1/ingest/jobs/{job_id}/events", responses=ERROR_RESPONSES)
async def job_events(job_id: str, request: Request, svc: Svc, tenant: Tenant) -> EventSourceResponse:
    """SSE: ``progress`` (the job, each time it changed), then ``done`` (the job, finished)."""
    _job_out(await svc.jobs.get(job_id), tenant, job_id)  # 404 before the stream starts
    return EventSourceResponse(_progress(svc, tenant, job_id, request), ping=15)


async def _progress(
    svc: Services, tenant: str, job_id: str, request: Request
) -> AsyncIterator[ServerSentEvent]:
    seen: float | None = None
    while True:
        state = await svc.jobs.get(job_id)
        job = _job_out(state, tenant, job_id)
        if job.status in ("done", "failed", "cancelled"):
            yield ServerSentEvent(job.model_dump_json(), event="done")
            return
        if job.updated_at != seen:
            seen = job.updated_at
            yield ServerSentEvent(job.model_dump_json(), event="progress")
        if await request.is_disconnected():
            return
        await asyncio.sleep(EVENTS_INTERVAL_S)


@router.delete("/v1/ingest/jobs/{job_id}", response_model=JobOut, responses=ERROR_RESPONSES)
async def cancel_job(job_id: str, svc: Svc, tenant: Tenant) -> JobOut:
    """Cancels a queued or running job (a running one stops between batches); finished ones stay."""
    _job_out(await svc.jobs.get(job_id), tenant, job_id)
    return _job_out(await svc.jobs.cancel(job_id), tenant, job_id)
