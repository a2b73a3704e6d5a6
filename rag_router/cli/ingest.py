"""ingest · jobs follow: files into the store, in this process or uploaded to the server that owns it.

Against a server, files go up in bounded batches (one ingestion job each), the progress bar is fed
by the jobs' event streams, and the report at the end is the same as in process. Ctrl-C asks the
server to cancel; ``--detach`` leaves the jobs running.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from indexers.ingest.load import FieldMap, LoadOptions, iter_files, load_paths
from indexers.ingest.ray_pipeline import RayOptions
from indexers.ingest.results import IngestReport, OnBatch, Placement
from rag_router.cli.common import app, console, fail, local_services, server_url, setup_logging
from rag_router.cli.store import Url, jobs
from rag_router.client import ApiError, Client
from rag_router.services import Services, build_ray_pipeline
from rag_router.settings import Settings, get_settings

UPLOAD_FILES = 200  # files per upload (one job each)
Engine = Annotated[str, typer.Option(help="inprocess | ray: on a Ray cluster, in this process's data dir")]
RayAddress = Annotated[
    str | None, typer.Option(help="--engine ray: the cluster to join (default: a local Ray)")
]
UnitMb = Annotated[
    float | None,
    typer.Option(min=0.1, help="--engine ray: MB of input a prepare task takes (default 1; 8 on a GPU)"),
]
EmbedUnits = Annotated[
    int | None,
    typer.Option(min=1, help="--engine ray: units an embedding call takes (default 4; 2 with 8 MB units)"),
]


@dataclass(slots=True)
class Summary:
    """What an ingest did, however it ran (the report's rows)."""

    documents: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    failed: int = 0
    chunks_written: int = 0
    seconds: float = 0.0
    chunks_embedded: int | None = None  # known in process only
    chunks_cached: int | None = None
    failures: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def of_report(cls, report: IngestReport) -> Summary:
        return cls(
            documents=report.documents,
            created=report.count("created"),
            updated=report.count("updated"),
            unchanged=report.count("unchanged"),
            failed=report.count("failed"),
            chunks_written=report.chunks_written,
            seconds=report.seconds,
            chunks_embedded=report.chunks_embedded,
            chunks_cached=report.chunks_cached,
            failures=[(f.id, f.error or "failed") for f in report.failures],
        )

    def merge(self, other: Summary) -> None:
        for name in ("documents", "created", "updated", "unchanged", "failed", "chunks_written", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures += other.failures

    def add_job(self, job: dict[str, Any]) -> None:
        self.documents += job["done"] + job["failed"]
        self.created += job["created"]
        self.updated += job["updated"]
        self.unchanged += job["unchanged"]
        self.failed += job["failed"]
        self.chunks_written += job["chunks"]
        self.seconds += job["seconds"]
        self.failures += [(e["id"], e["error"]) for e in job["errors"]]


def print_report(s: Summary) -> None:
    rate = s.chunks_written / s.seconds if s.seconds > 0 else 0.0
    table = Table(title="ingest summary", show_header=False)
    rows: list[tuple[str, object]] = [
        ("documents", s.documents),
        ("created", s.created),
        ("updated", s.updated),
        ("skipped (unchanged)", s.unchanged),
        ("failed", s.failed),
        ("chunks written", s.chunks_written),
        ("chunks embedded", s.chunks_embedded),
        ("chunks from the embedding cache", s.chunks_cached),
        ("chunks/s", f"{rate:.1f}"),
        ("seconds", f"{s.seconds:.1f}"),
    ]
    for label, value in rows:
        if value is not None:
            table.add_row(label, str(value))
    console.print(table)
    for doc_id, error in s.failures[:20]:
        console.print(f"[red]failed[/red] {doc_id}: {error}", highlight=False)
    if len(s.failures) > 20:
        console.print(f"[red]… and {len(s.failures) - 20} more failures[/red]")


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="files or folders", exists=True)],
    tier: Annotated[str, typer.Option(help="auto | hot | cold")] = "auto",
    tenant: Annotated[
        str, typer.Option(help="tenant the documents belong to (a server with API keys: the key's)")
    ] = "default",
    include: Annotated[
        list[str] | None, typer.Option(help="glob on paths inside folders, e.g. '**/*.md' (repeatable)")
    ] = None,
    exclude: Annotated[list[str] | None, typer.Option(help="glob of paths to skip (repeatable)")] = None,
    id_field: Annotated[str, typer.Option(help="JSONL key of the document id")] = "id",
    text_field: Annotated[str, typer.Option(help="JSONL key of the text")] = "text",
    title_field: Annotated[str, typer.Option(help="JSONL key of the title")] = "title",
    if_empty: Annotated[
        bool, typer.Option("--if-empty", help="skip when the tiers already hold data")
    ] = False,
    detach: Annotated[
        bool, typer.Option("--detach", help="against a server: upload, print the job ids, return")
    ] = False,
    batch_mb: Annotated[float, typer.Option(min=0.1, help="against a server: MB per upload")] = 16.0,
    url: Url = None,
    engine: Engine = "inprocess",
    ray_address: RayAddress = None,
    unit_mb: UnitMb = None,
    embed_units: EmbedUnits = None,
) -> None:
    """Batch-ingest files and folders (BEIR corpus.jsonl[.gz], .jsonl, .txt, .md, .html, .pdf)."""
    if tier not in ("auto", "hot", "cold") or engine not in ("inprocess", "ray"):
        raise typer.BadParameter("--tier must be auto, hot or cold; --engine inprocess or ray")
    if engine != "ray" and (unit_mb is not None or embed_units is not None):
        raise typer.BadParameter("--unit-mb and --embed-units size the work of --engine ray")
    settings = get_settings()
    setup_logging(settings)
    options = LoadOptions(
        tenant=tenant,
        include=include or (),
        exclude=exclude or (),
        fields=FieldMap(id=id_field, text=text_field, title=title_field),
        max_bytes=int(settings.ingest.max_file_mb * 1024 * 1024),
    )
    found = server_url(settings, url)
    if engine == "ray":
        _ray_here(found)
        ray = RayOptions(address=ray_address)
        ray = replace(
            ray,
            unit_mb=ray.unit_mb if unit_mb is None else unit_mb,
            embed_units=ray.embed_units if embed_units is None else embed_units,
        )
        asyncio.run(_ingest_ray(settings, paths, tier, options, if_empty, ray))  # type: ignore[arg-type]
        return
    if found is None:
        asyncio.run(_ingest_here(settings, paths, tier, options, if_empty))  # type: ignore[arg-type]
        return
    form = {"id_field": id_field, "text_field": text_field, "title_field": title_field}
    if tenant != "default":  # a server with API keys takes the tenant from RAG_API_KEY instead
        form["tenant"] = tenant
    key = settings.api_key.get_secret_value() if settings.api_key else None
    client = Client.connect(found, key)
    try:
        if if_empty and any(b.get("chunks") for b in client.ready()["backends"].values()):
            console.print("[dim]tiers already hold data; nothing ingested[/dim]")
            return
        _ingest_there(client, iter_files(paths, options), tier, detach, int(batch_mb * 1024 * 1024), form)
    except ApiError as exc:
        fail(exc.message)
    finally:
        client.close()


async def _ingest_here(
    settings: Settings, paths: list[Path], tier: Placement, options: LoadOptions, if_empty: bool
) -> None:
    async with local_services(settings) as services:
        counts = [await t.count() for t in services.tiers.values()]
        if if_empty and any(counts):
            console.print("[dim]tiers already hold data; nothing ingested[/dim]")
            return
        report = await ingest_with_progress(services, load_paths(paths, options=options), tier)
    print_report(Summary.of_report(report))


def _ray_here(server: str | None) -> None:
    if server is not None:
        fail(
            f"--engine ray writes the data dir from this process, and the server at {server} holds it: "
            "stop the server, or ingest through it without --engine ray"
        )


async def _ingest_ray(
    settings: Settings,
    paths: list[Path],
    tier: Placement,
    options: LoadOptions,
    if_empty: bool,
    ray_options: RayOptions,
) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        fail("--engine ray needs Ray: pip install 'rag-router[ray]'")
    async with local_services(settings) as services:
        if if_empty and any([await t.count() for t in services.tiers.values()]):
            console.print("[dim]tiers already hold data; nothing ingested[/dim]")
            return
        try:
            pipeline = build_ray_pipeline(settings, services, ray_options)
        except ValueError as exc:
            fail(str(exc))

        async def run(update: OnBatch) -> IngestReport:
            report = await pipeline.ingest(paths, load=options, placement=tier, on_batch=update)
            if not report.cancelled:
                await asyncio.gather(*(t.optimize() for t in services.tiers.values()))
            return report

        report = await _with_progress(run)
    print_report(Summary.of_report(report))


def _progress() -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("ingesting {task.completed} docs"),
        BarColumn(),
        TextColumn("[red]{task.fields[failed]} failed"),
        TextColumn("{task.fields[chunks]} chunks · {task.fields[rate]:.1f} chunks/s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )


async def ingest_with_progress(services: Services, docs: Any, placement: Any) -> IngestReport:
    async def run(update: OnBatch) -> IngestReport:
        return await services.pipeline.ingest(docs, placement=placement, optimize=True, on_batch=update)

    return await _with_progress(run)


async def _with_progress(run: Callable[[OnBatch], Awaitable[IngestReport]]) -> IngestReport:
    with _progress() as progress:
        task = progress.add_task("ingest", total=None, rate=0.0, failed=0, chunks=0)

        def update(_: Any, report: IngestReport) -> None:
            progress.update(
                task,
                completed=report.documents,
                rate=report.chunks_per_s,
                failed=report.count("failed"),
                chunks=report.chunks_written,
            )

        return await run(update)


def _batches(files: Iterable[tuple[Path, Path]], max_bytes: int) -> Iterator[list[tuple[str, Path]]]:
    """(name, path) groups of at most ``max_bytes`` (a larger file goes alone) and UPLOAD_FILES files."""
    batch: list[tuple[str, Path]] = []
    size = 0
    for path, root in files:
        length = path.stat().st_size
        if batch and (size + length > max_bytes or len(batch) >= UPLOAD_FILES):
            yield batch
            batch, size = [], 0
        batch.append((path.relative_to(root).as_posix(), path))
        size += length
    if batch:
        yield batch


def _ingest_there(
    client: Client,
    files: Iterable[tuple[Path, Path]],
    tier: str,
    detach: bool,
    max_bytes: int,
    form: dict[str, str] | None = None,
) -> None:
    summary = Summary()
    job_ids: list[str] = []
    try:
        _upload(client, files, tier, max_bytes, form or {}, summary, job_ids)
        if detach or not job_ids:
            for job_id in job_ids:
                console.print(f"job {job_id} (follow: rag-router jobs follow {job_id})")
            if not job_ids:
                print_report(summary)
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


def _upload(
    client: Client,
    files: Iterable[tuple[Path, Path]],
    tier: str,
    max_bytes: int,
    form: dict[str, str],
    summary: Summary,
    job_ids: list[str],
) -> None:
    """Upload in batches, one job each; ``job_ids`` grows as they are accepted."""
    with console.status("uploading") as status:
        for n, batch in enumerate(_batches(files, max_bytes), 1):
            status.update(f"uploading batch {n} ({len(batch)} files)")
            try:
                accepted = client.upload(batch, tier=tier, **form)
            except ApiError as exc:
                if exc.status != 422:  # 422: nothing readable in this batch; the others go on
                    raise
                summary.failures.append((batch[0][0] if len(batch) == 1 else f"batch {n}", exc.message))
                summary.failed += len(batch)
                summary.documents += len(batch)
                continue
            job_ids.append(accepted["job_id"])
            for f in accepted["files"]:
                if f["error"]:  # unreadable files count as failed documents, as in process
                    summary.failures.append((f["name"], f["error"]))
                    summary.failed += 1 if f["documents"] == 0 else 0
                    summary.documents += 1 if f["documents"] == 0 else 0


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
    with _progress() as progress:
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
