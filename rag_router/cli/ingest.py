"""ingest: files into the store, in this process (inline or on Ray) or uploaded to the server
that owns it (``upload.py``); the report at the end is the same either way (``report.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rag_router.cli.common import app, console, local_services, new_store_check, server_url, setup_logging
from rag_router.cli.group import fail
from rag_router.cli.report import Summary, exit_for_failures, print_report, progress_bar
from rag_router.cli.store import Url
from rag_router.cli.upload import ingest_there
from rag_router.client import ApiError, Client
from rag_router.settings import Settings, get_settings

if TYPE_CHECKING:  # the loaders, the engines and the model load when a command runs, not for --help
    from indexers.ingest.load import LoadOptions
    from indexers.ingest.ray.pipeline import RayOptions
    from indexers.ingest.results import IngestReport, OnBatch, Placement
    from rag_router.services import Services

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
    new_store: Annotated[
        bool,
        typer.Option(
            "--new-store",
            help="with no store or server: create the store even inside a folder being ingested",
        ),
    ] = False,
    this_store: Annotated[
        bool,
        typer.Option(
            "--this-store",
            help="the data dir's own store (through its server when one runs), never the running server "
            "of another data dir: how `make run` puts the sample where its `serve` will look",
        ),
    ] = False,
    engine: Engine = "inprocess",
    ray_address: RayAddress = None,
    unit_mb: UnitMb = None,
    embed_units: EmbedUnits = None,
) -> None:
    """Batch-ingest files and folders (BEIR corpus.jsonl[.gz], .jsonl, .txt, .md, .html, .pdf).

    A file's id is its path relative to the folder named (one file named: its name; several
    paths: their common parent folder); an id read twice fails its second copy (--engine ray
    keeps the last and reports the repeat). The report goes to stdout; with --detach, each job
    id alone on a line.

    Exit status: 0 all ingested; 3 some files or records failed, or ids repeated with --engine ray
    (the report lists them); 1 a server job failed or was cancelled; 2 an error; 130 interrupted.
    """
    if tier not in ("auto", "hot", "cold") or engine not in ("inprocess", "ray"):
        raise typer.BadParameter("--tier must be auto, hot or cold; --engine inprocess or ray")
    if engine != "ray" and (unit_mb is not None or embed_units is not None):
        raise typer.BadParameter("--unit-mb and --embed-units size the work of --engine ray")
    from indexers.ingest.load import FieldMap, LoadOptions, iter_files
    from indexers.ingest.ray.pipeline import RayOptions

    settings = get_settings()
    setup_logging(settings)
    options = LoadOptions(
        tenant=tenant,
        include=include or (),
        exclude=exclude or (),
        fields=FieldMap(id=id_field, text=text_field, title=title_field),
        max_bytes=int(settings.ingest.max_file_mb * 1024 * 1024),
    )
    found = server_url(settings, url, others=not this_store)
    if engine == "ray":
        _ray_here(found)
        new_store_check(settings, paths, allowed=new_store)
        ray = RayOptions(address=ray_address)
        ray = replace(
            ray,
            unit_mb=ray.unit_mb if unit_mb is None else unit_mb,
            embed_units=ray.embed_units if embed_units is None else embed_units,
        )
        asyncio.run(_ingest_ray(settings, paths, tier, options, if_empty, ray))  # type: ignore[arg-type]
        return
    if found is None:
        new_store_check(settings, paths, allowed=new_store)
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
        max_bytes = int(batch_mb * 1024 * 1024)
        ingest_there(client, iter_files(paths, options), tier, detach, max_bytes, form, options)
    except ApiError as exc:
        fail(exc.message)
    finally:
        client.close()


async def _ingest_here(
    settings: Settings, paths: list[Path], tier: Placement, options: LoadOptions, if_empty: bool
) -> None:
    from indexers.ingest.load import load_paths

    async with local_services(settings) as services:
        counts = [await t.count() for t in services.tiers.values()]
        if if_empty and any(counts):
            console.print("[dim]tiers already hold data; nothing ingested[/dim]")
            return
        report = await ingest_with_progress(services, load_paths(paths, options=options), tier)
    _report(report)


def _report(report: IngestReport) -> None:
    summary = Summary.of_report(report)
    print_report(summary)
    exit_for_failures(summary)


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
            from rag_router.services import build_ray_pipeline

            pipeline = build_ray_pipeline(settings, services, ray_options)
        except ValueError as exc:
            fail(str(exc))

        async def run(update: OnBatch) -> IngestReport:
            report = await pipeline.ingest(paths, load=options, placement=tier, on_batch=update)
            if not report.cancelled:
                await asyncio.gather(*(t.optimize() for t in services.tiers.values()))
            return report

        report = await _with_progress(run)
    _report(report)


async def ingest_with_progress(services: Services, docs: Any, placement: Any) -> IngestReport:
    async def run(update: OnBatch) -> IngestReport:
        return await services.pipeline.ingest(docs, placement=placement, optimize=True, on_batch=update)

    return await _with_progress(run)


async def _with_progress(run: Callable[[OnBatch], Awaitable[IngestReport]]) -> IngestReport:
    with progress_bar() as progress:
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
