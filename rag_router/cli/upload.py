"""ingest against a server · jobs follow: files uploaded in bounded batches, one job each, followed
to their end with one progress bar (the jobs' event streams); Ctrl-C asks the server to cancel,
``--detach`` leaves the jobs running."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from rag_router.cli.common import console, server_url, setup_logging
from rag_router.cli.group import fail
from rag_router.cli.repeats import Repeats, Upload
from rag_router.cli.report import Summary, exit_for_failures, print_report, progress_bar
from rag_router.cli.store import Url, jobs
from rag_router.client import ApiError, Client
from rag_router.settings import get_settings

if TYPE_CHECKING:
    from indexers.ingest.load import LoadOptions

UPLOAD_FILES = 200  # files per upload (one job each)


def batches(files: Iterable[tuple[Path, Path]], max_bytes: int) -> Iterator[list[tuple[str, Path]]]:
    """(name, path) groups of (file, the folder its id is relative to), as ``grouped`` cuts them."""
    from indexers.ingest.load import relative_id  # not at import: --help stays fast

    for batch in grouped((Upload(relative_id(p, r), p, p) for p, r in files), max_bytes):
        yield [(u.name, u.path) for u in batch]


def grouped(files: Iterable[Upload], max_bytes: int) -> Iterator[list[Upload]]:
    """Groups of at most ``max_bytes`` (a larger file goes alone) and UPLOAD_FILES files."""
    batch: list[Upload] = []
    size = 0
    for upload in files:
        length = upload.path.stat().st_size
        if batch and (size + length > max_bytes or len(batch) >= UPLOAD_FILES):
            yield batch
            batch, size = [], 0
        batch.append(upload)
        size += length
    if batch:
        yield batch


def ingest_there(
    client: Client,
    files: Iterable[tuple[Path, Path]],
    tier: str,
    detach: bool,
    max_bytes: int,
    form: dict[str, str] | None = None,
    options: LoadOptions | None = None,
) -> None:
    """``options``: what the files are read with (the field names of ``form``), to find the ids
    that repeat across batches."""
    from indexers.ingest.load import LoadOptions  # not at import: --help stays fast

    summary = Summary()
    job_ids: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="rag-upload-") as folder:
            repeats = Repeats(options or LoadOptions(), summary, Path(folder))
            _upload(client, repeats.uploads(files), tier, max_bytes, form or {}, summary, job_ids)
        if detach and job_ids:
            _print_detached(job_ids, summary)
            return
        if not job_ids:
            print_report(summary)
            exit_for_failures(summary)
            return
        console.print(f"[dim]jobs: {' '.join(job_ids)}[/dim]", highlight=False)
        finished = follow(client, job_ids, summary)
    except (KeyboardInterrupt, ApiError) as exc:  # stop what was sent, then say what happened
        for job_id in job_ids:
            with contextlib.suppress(ApiError):
                client.cancel(job_id)
        if job_ids:
            console.print(f"[yellow]cancelled {len(job_ids)} job(s); documents written so far stay[/yellow]")
        if isinstance(exc, ApiError):
            fail(exc.message)
        raise typer.Exit(130) from None
    print_report(summary)
    _exit_for(finished)
    exit_for_failures(summary)


def _print_detached(job_ids: list[str], summary: Summary) -> None:
    """Each job id alone on a stdout line (``JOB=$(rag-router ingest … --detach)``); the rest,
    the files that could not be read included, on stderr."""
    for job_id in job_ids:
        typer.echo(job_id)
    console.print(f"follow with: rag-router jobs follow {job_ids[0]}", highlight=False)
    for source, error in summary.failures:
        console.print(f"[red]failed[/red] {source}: {error}", highlight=False)
    exit_for_failures(summary)


def _upload(
    client: Client,
    files: Iterable[Upload],
    tier: str,
    max_bytes: int,
    form: dict[str, str],
    summary: Summary,
    job_ids: list[str],
) -> None:
    """Upload in batches, one job each; ``job_ids`` grows as they are accepted."""
    with console.status("uploading") as status:
        for n, batch in enumerate(grouped(files, max_bytes), 1):
            status.update(f"uploading batch {n} ({len(batch)} files)")
            try:
                accepted = client.upload([(u.name, u.path) for u in batch], tier=tier, **form)
            except ApiError as exc:
                if exc.status != 422:  # 422: nothing readable in this batch; the others go on
                    raise
                local = {u.name: str(u.local) for u in batch}
                if exc.failures:  # one line a file, as an ingest in process reports them
                    summary.failures += [(local.get(f["id"], f["id"]), f["error"]) for f in exc.failures]
                else:
                    where = str(batch[0].local) if len(batch) == 1 else f"batch {n}"
                    summary.failures.append((where, exc.message))
                summary.failed += len(batch)
                summary.documents += len(batch)
                continue
            finally:
                for copy in (u.path for u in batch if u.path != u.local):  # sent: disk stays flat
                    copy.unlink(missing_ok=True)
            job_ids.append(accepted["job_id"])
            _count_unread(accepted["files"], {u.name: u.local for u in batch}, summary)


def _count_unread(files: list[dict[str, Any]], paths: dict[str, Path], summary: Summary) -> None:
    """Each file or record the server could not read is a failed document, named where it is on
    this machine (``folder/a.jsonl:3``), as an in-process ingest names it."""
    for f in files:
        for failure in f.get("failures", []):
            name, local = f["name"], paths.get(f["name"])
            where = failure["id"]
            if local is not None and where.startswith(name):
                where = str(local) + where[len(name) :]
            summary.failures.append((where, failure["error"]))
            summary.failed += 1
            summary.documents += 1


def _exit_for(finished: dict[str, str]) -> None:
    """Exit status 1 when a job did not end ``done`` (it failed, or was cancelled elsewhere)."""
    unfinished = {job_id: status for job_id, status in finished.items() if status != "done"}
    for job_id, status in unfinished.items():
        console.print(f"[red]job {job_id} ended {status}[/red]")
    if unfinished:
        raise typer.Exit(1)


def follow(client: Client, job_ids: list[str], summary: Summary) -> dict[str, str]:
    """Follow jobs to their end with one progress bar; add each finished job to ``summary``.

    A stream that ends without its ``done`` event (a replica restarting) is opened again.
    Returns each job's final status."""
    totals = {job_id: client.job(job_id)["total"] for job_id in job_ids}
    finished: dict[str, str] = {}
    with progress_bar() as progress:
        task = progress.add_task("ingest", total=sum(totals.values()), rate=0.0, failed=0, chunks=0)
        base = Summary()
        for job_id in job_ids:
            while job_id not in finished:
                for event, job in client.events(job_id):
                    progress.update(
                        task,
                        completed=base.documents + job["done"] + job["failed"],
                        failed=base.failed + job["failed"],
                        chunks=base.chunks_written + job["chunks"],
                        rate=job["chunks_per_s"],
                    )
                    if event == "done":
                        base.add_job(job)
                        finished[job_id] = job["status"]
    summary.merge(base)
    return finished


@jobs.command("follow")
def jobs_follow(job_id: str, url: Url = None) -> None:
    """Follow a job on the server with a progress bar; print its report when it ends."""
    settings = get_settings()
    setup_logging(settings)
    found = server_url(settings, url)
    if found is None:
        fail("no server holds the data dir: jobs run in a server (rag-router serve)")
    client = Client.connect(found, settings.api_key.get_secret_value() if settings.api_key else None)
    summary = Summary()
    try:
        finished = follow(client, [job_id], summary)
    except ApiError as exc:
        fail(exc.message)
    finally:
        client.close()
    print_report(summary)
    _exit_for(finished)
