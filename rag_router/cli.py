"""The ``rag-router`` console script: serve · ingest · retier · query · eval."""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import json
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from indexers.ingest.load import FieldMap, LoadOptions, load_paths
from indexers.ingest.pipeline import IngestReport, Placement
from indexers.ingest.retier import RetierReport
from indexers.ingest.retier import retier as run_retier
from indexers.manifest import IndexMismatch
from indexers.records import Document
from indexers.tiers.query import LEGS, Leg
from rag_router.datasets import CATALOGUE, DatasetError, fetch
from rag_router.evaluate import SUMMARY_KEYS, Dataset, load_dataset, run_queries, split_dates
from rag_router.owner import current_owner, holding
from rag_router.search.flow import SearchParams
from rag_router.services import Services, build_services
from rag_router.settings import Settings, get_settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Hybrid RAG retrieval service.")
datasets = typer.Typer(no_args_is_help=True, help="Public BEIR collections for `rag-router eval`.")
app.add_typer(datasets, name="datasets")
console = Console(stderr=True)

_LEGS: dict[str, tuple[Leg, ...]] = {"bm25": ("lexical",), "dense": ("dense",), "hybrid": LEGS}


def _setup_logging(settings: Settings, *, command: bool = True) -> None:
    """A command's output is its report: INFO lines only when RAG_LOG_LEVEL asks for them."""
    level = settings.log_level if not command or "RAG_LOG_LEVEL" in os.environ else "WARNING"
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for noisy in ("httpx", "sentence_transformers", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@asynccontextmanager
async def _services(settings: Settings) -> AsyncIterator[Services]:
    owner = current_owner(settings.data_dir)
    if owner is not None:  # the embedded engines are single-process: say who holds them
        _fail(owner.describe(settings.data_dir))
    try:
        services = await build_services(settings)
    except IndexMismatch as exc:  # a setting to change, not a bug: one line, no traceback
        _fail(str(exc))
    except Exception as exc:
        if "WouldBlock" not in str(exc) and "lock" not in str(exc).lower():
            raise
        _fail(f"the data dir {settings.data_dir} is open in another process ({exc}); stop it first")
    try:
        yield services
    finally:
        await services.close()


def _fail(message: str) -> NoReturn:
    """A condition the user can fix: one line on stderr, exit status 2, no traceback."""
    Console(stderr=True).print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(2)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="bind address (default RAG_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default RAG_PORT)")] = None,
) -> None:
    """Run the REST service."""
    import uvicorn

    from rag_router.api.app import create_app

    settings = get_settings()
    _setup_logging(settings, command=False)
    # Measured at 64 clients (docs/benchmarks.md): with CPython's default thresholds (700, 10,
    # 10) the collector ran every few requests and walked the models' heap, stalling the event
    # loop up to 265 ms; fewer young collections and a frozen startup heap gave +20-30 %
    # throughput and a quarter of the stalls.
    gc.set_threshold(50_000, 50, 100)
    owner = current_owner(settings.data_dir)
    if owner is not None:
        _fail(owner.describe(settings.data_dir))
    host, port = host or settings.host, port or settings.port
    with holding(settings.data_dir, f"http://{host}:{port}"):
        uvicorn.run(
            create_app(settings, freeze_gc=True),
            host=host,
            port=port,
            log_level=settings.log_level.lower(),
            access_log=settings.access_log,
        )


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="files or folders", exists=True)],
    tier: Annotated[str, typer.Option(help="auto | hot | cold")] = "auto",
    tenant: Annotated[str, typer.Option(help="tenant the documents belong to")] = "default",
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
) -> None:
    """Batch-ingest files and folders (BEIR corpus.jsonl[.gz], .jsonl, .txt, .md, .html, .pdf)."""
    if tier not in ("auto", "hot", "cold"):
        raise typer.BadParameter("--tier must be auto, hot or cold")
    settings = get_settings()
    _setup_logging(settings)
    options = LoadOptions(
        tenant=tenant,
        include=include or (),
        exclude=exclude or (),
        fields=FieldMap(id=id_field, text=text_field, title=title_field),
        max_bytes=int(settings.ingest.max_file_mb * 1024 * 1024),
    )
    asyncio.run(_ingest(settings, paths, tier, options, if_empty))  # type: ignore[arg-type]


async def _ingest(
    settings: Settings, paths: list[Path], tier: Placement, options: LoadOptions, if_empty: bool
) -> None:
    async with _services(settings) as services:
        counts = [await t.count() for t in services.tiers.values()]
        if if_empty and any(counts):
            console.print("[dim]tiers already hold data; nothing ingested[/dim]")
            return
        report = await _ingest_with_progress(services, load_paths(paths, options=options), tier)
    _print_report(report)


async def _ingest_with_progress(services: Services, docs: Any, placement: Any) -> IngestReport:
    columns = (
        SpinnerColumn(),
        TextColumn("ingesting {task.completed} docs"),
        TextColumn("[red]{task.fields[failed]} failed"),
        TextColumn("{task.fields[chunks]} chunks · {task.fields[rate]:.1f} chunks/s"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("ingest", total=None, rate=0.0, failed=0, chunks=0)

        def update(_: Any, report: IngestReport) -> None:
            progress.update(
                task,
                completed=report.documents,
                rate=report.chunks_per_s,
                failed=report.count("failed"),
                chunks=report.chunks_written,
            )

        return await services.pipeline.ingest(docs, placement=placement, optimize=True, on_batch=update)


def _print_report(report: IngestReport) -> None:
    table = Table(title="ingest summary", show_header=False)
    for label, value in (
        ("documents", report.documents),
        ("created", report.count("created")),
        ("updated", report.count("updated")),
        ("skipped (unchanged)", report.count("unchanged")),
        ("failed", report.count("failed")),
        ("chunks written", report.chunks_written),
        ("chunks embedded", report.chunks_embedded),
        ("chunks from the embedding cache", report.chunks_cached),
        ("chunks/s", f"{report.chunks_per_s:.1f}"),
        ("seconds", f"{report.seconds:.1f}"),
    ):
        table.add_row(label, str(value))
    console.print(table)
    for failure in report.failures[:20]:
        console.print(f"[red]failed[/red] {failure.id}: {failure.error}")
    if len(report.failures) > 20:
        console.print(f"[red]… and {report.count('failed') - 20} more failures[/red]")


@app.command()
def retier(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only count what would move")] = False,
) -> None:
    """Move documents that aged out of the hot window to the cold tier (copy → verify → delete)."""
    settings = get_settings()
    _setup_logging(settings)
    report = asyncio.run(_retier(settings, dry_run))
    verb = "would move" if dry_run else "moved"
    console.print(
        f"{report.aged} documents past the hot window; {verb} {report.moved if not dry_run else report.aged}"
    )
    if not dry_run:
        console.print(f"{report.chunks} chunks moved to the cold tier")
    for error in report.errors:
        console.print(f"[red]{error}[/red]")
    if report.errors:
        raise typer.Exit(1)


async def _retier(settings: Settings, dry_run: bool) -> RetierReport:
    async with _services(settings) as services:
        return await run_retier(
            services.tiers["hot"],
            services.tiers["cold"],
            services.pipeline,
            hot_window_days=settings.tiers.hot_window_days,
            today=dt.date.today(),
            dry_run=dry_run,
        )


@app.command()
def query(
    text: Annotated[str, typer.Argument(help="the question")],
    route: Annotated[str, typer.Option(help="auto | hot | cold | both")] = "auto",
    top_k: Annotated[int, typer.Option(min=1, max=100)] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="print the response as JSON")] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="print the route, its reason and the features")
    ] = False,
) -> None:
    """Run one query and print the hits with their sources."""
    settings = get_settings()
    _setup_logging(settings)
    asyncio.run(_query(settings, text, route, top_k, as_json, explain))


async def _query(settings: Settings, text: str, route: str, top_k: int, as_json: bool, explain: bool) -> None:
    from rag_router.api.schemas import SearchResponse

    async with _services(settings) as services:
        outcome = await services.searcher.search(SearchParams(text, top_k, route))  # type: ignore[arg-type]
    response = SearchResponse.from_outcome(outcome)
    if as_json:
        typer.echo(response.model_dump_json(indent=2))
        return
    route_json = response.route
    typer.echo(f"route: {', '.join(route_json.tiers)} — {route_json.reason}")
    if explain:
        typer.echo(f"filters: {json.dumps(route_json.filters, ensure_ascii=False)}")
        typer.echo(f"features: {json.dumps(route_json.features, ensure_ascii=False)}")
    for n, hit in enumerate(response.hits, 1):
        title = f" — {hit.title}" if hit.title else ""
        typer.echo(f"[{n}] {hit.doc_id}{title} ({hit.tier}, score {hit.score:.4f})")
        typer.echo(f"    {hit.text[:300]}")


def _corpus(dataset: Dataset, split: float | None) -> Iterator[Document]:
    """The corpus, or with --tier-split the corpus re-dated by ``split_dates`` (placement by date)."""
    if split is None:
        return dataset.corpus()
    today = dt.date.today()
    return (split_dates(doc, split, today) for doc in dataset.corpus())


@app.command("eval")
def evaluate(
    dataset_dir: Annotated[Path, typer.Argument(help="BEIR-layout folder", exists=True, file_okay=False)],
    route: Annotated[str, typer.Option(help="auto | hot | cold | both")] = "both",
    split: Annotated[str, typer.Option(help="qrels split")] = "test",
    legs: Annotated[str, typer.Option(help="bm25 | dense | hybrid")] = "hybrid",
    data_dir: Annotated[
        Path | None, typer.Option(help="index location to reuse (default: temporary)")
    ] = None,
    tier: Annotated[str, typer.Option(help="where the corpus goes: auto | hot | cold")] = "auto",
    tier_split: Annotated[float | None, typer.Option(min=0.0, max=1.0, help="share placed hot")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Evaluate retrieval on a BEIR-layout dataset (nDCG@10, recall@100, MRR@10, success@1)."""
    if legs not in _LEGS:
        raise typer.BadParameter("--legs must be bm25, dense or hybrid")
    missing = [
        name
        for name in ("corpus.jsonl[.gz]", "queries.jsonl", f"qrels/{split}.tsv")
        if not any((dataset_dir / n).exists() for n in _variants(name))
    ]
    if missing:
        _fail(
            f"{dataset_dir} is not a BEIR-layout folder: no {', '.join(missing)} "
            "(data/eval/udhr is one; `rag-router datasets fetch` gets public ones)"
        )
    temp = None if data_dir else Path(tempfile.mkdtemp(prefix="rag-eval-"))
    settings = get_settings(data_dir=data_dir or temp)
    _setup_logging(settings)
    try:
        report = asyncio.run(_eval(settings, dataset_dir, route, split, _LEGS[legs], tier, tier_split))
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    table = Table(
        title=f"{dataset_dir.name} · route {route} · legs {legs}",
        caption="cold_share: the share of queries that searched the cold tier; latency: per query, "
        "300 candidates per leg",
    )
    for key in SUMMARY_KEYS:
        table.add_row(key, f"{report[key]:.4f}" if isinstance(report[key], float) else str(report[key]))
    for kind, scores in report["by_kind"].items():  # query kinds of the set (clause, topic, …)
        table.add_row(f"{kind}: success@1 / nDCG@10", f"{scores['success@1']:.4f} / {scores['ndcg@10']:.4f}")
    Console().print(table)


def _variants(name: str) -> list[str]:
    """ "corpus.jsonl[.gz]" → ["corpus.jsonl", "corpus.jsonl.gz"]; "queries.jsonl" may be gzipped too."""
    base = name.replace("[.gz]", "")
    return [base, f"{base}.gz"]


async def _eval(
    settings: Settings,
    path: Path,
    route: str,
    split: str,
    legs: tuple[Leg, ...],
    tier: str,
    tier_split: float | None,
) -> dict[str, Any]:
    dataset = load_dataset(path, split)
    async with _services(settings) as services:
        ingest_report = await _ingest_with_progress(services, _corpus(dataset, tier_split), tier)
        report = await run_queries(services.searcher, dataset, route=route, legs=legs)  # type: ignore[arg-type]
        report["tiers"] = {name: await t.count() for name, t in services.tiers.items()}
    report["ingest"] = {
        "documents": ingest_report.documents,
        "chunks_embedded": ingest_report.chunks_embedded,
        "unchanged": ingest_report.count("unchanged"),
    }
    return report


@datasets.command("list")
def datasets_list() -> None:
    """The collections `datasets fetch` knows, with where they come from."""
    table = Table("name", "about", "archive (MD5 from the BEIR README)")
    table.columns[2].overflow = "fold"  # whole URLs and checksums, however narrow the terminal
    for c in CATALOGUE.values():
        table.add_row(c.name, c.about, f"{c.url}\n{c.md5}")
    Console().print(table)


@datasets.command("fetch")
def datasets_fetch(
    name: Annotated[str, typer.Argument(help="a name from `rag-router datasets list`")],
    dest: Annotated[Path, typer.Option(help="where DEST/NAME is unpacked")] = Path("datasets"),
) -> None:
    """Download a BEIR collection, check its MD5, unpack it to DEST/NAME (needs internet)."""
    collection = CATALOGUE.get(name)
    if collection is None:
        _fail(f"unknown collection {name!r}; known: {', '.join(CATALOGUE)}")
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(f"{name}.zip", total=None)
        try:
            path = fetch(
                collection, dest, progress=lambda done, total: bar.update(task, completed=done, total=total)
            )
        except DatasetError as exc:
            _fail(str(exc))
    console.print(f"{name}: {path}  →  rag-router eval {path}")


if __name__ == "__main__":
    app()
