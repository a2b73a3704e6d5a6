"""eval · datasets: retrieval quality on BEIR-layout collections, in a store of its own."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from rag_router.cli.common import app, console, local_services, setup_logging
from rag_router.cli.group import fail
from rag_router.evaluation.datasets import CATALOGUE, DatasetError, fetch
from rag_router.settings import Settings, get_settings

if TYPE_CHECKING:  # the engines load when `eval` runs, not with every command's help
    from indexers.records import Document
    from indexers.tiers.query import Leg
    from rag_router.evaluation.retrieval import Dataset

datasets = typer.Typer(no_args_is_help=True, help="Public BEIR collections to evaluate on: list, fetch.")
app.add_typer(datasets, name="datasets")

_LEG_NAMES = ("bm25", "dense", "hybrid")


def _legs(name: str) -> tuple[Leg, ...]:
    from indexers.tiers.query import LEGS

    legs: dict[str, tuple[Leg, ...]] = {"bm25": ("lexical",), "dense": ("dense",), "hybrid": LEGS}
    return legs[name]


def _corpus(dataset: Dataset, split: float | None) -> Iterator[Document]:
    """The corpus, or with --tier-split the corpus re-dated by ``split_dates`` (placement by date)."""
    from rag_router.evaluation.retrieval import split_dates

    if split is None:
        return dataset.corpus()
    today = dt.date.today()
    return (split_dates(doc, split, today) for doc in dataset.corpus())


def _save(report: dict[str, Any], dataset: str, route: str, legs: str) -> None:
    """Keep the report in the service's data dir (``evals/``), where the page's Evaluate tab reads
    the latest; a data dir that cannot be written only loses that copy."""
    folder = get_settings().data_dir / "evals"
    entry = {
        **report,
        "dataset": dataset,
        "route": route,
        "legs": legs,
        "when": dt.datetime.now().isoformat(timespec="seconds"),
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{dataset}-{route}-{legs}.json").write_text(json.dumps(entry, indent=1), encoding="utf-8")
    except OSError:
        pass


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
    answers: Annotated[
        bool, typer.Option("--answers", help="score /v1/answer's answers (a set with answers.jsonl)")
    ] = False,
    rerank: Annotated[
        str | None,
        typer.Option(
            help="none | sentences | llm | a CrossEncoder name or path (default: RAG_RERANK__MODEL)"
        ),
    ] = None,
) -> None:
    """Evaluate retrieval on a BEIR-layout dataset (nDCG@10, recall@100, MRR@10, success@1).

    With --answers, the answers instead: gold span in the answer and before its first citation,
    first citation = gold document, out-of-corpus and answerable questions declined, median length.
    """
    overrides: dict[str, Any] = {"rerank": {"model": rerank}} if rerank else {}
    if answers:
        _answers(dataset_dir, data_dir, as_json, overrides)
        return
    from rag_router.evaluation.retrieval import SUMMARY_KEYS

    if legs not in _LEG_NAMES:
        raise typer.BadParameter("--legs must be bm25, dense or hybrid")
    missing = [
        name
        for name in ("corpus.jsonl[.gz]", "queries.jsonl", f"qrels/{split}.tsv")
        if not any((dataset_dir / n).exists() for n in _variants(name))
    ]
    if missing:
        fail(
            f"{dataset_dir} is not a BEIR-layout folder: no {', '.join(missing)} "
            "(data/eval/udhr is one; `rag-router datasets fetch` gets public ones)"
        )
    temp = None if data_dir else Path(tempfile.mkdtemp(prefix="rag-eval-"))
    settings = get_settings(data_dir=data_dir or temp, **overrides)
    setup_logging(settings)
    try:
        report = asyncio.run(_eval(settings, dataset_dir, route, split, _legs(legs), tier, tier_split))
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    report["rerank"] = settings.rerank.model
    _save(report, dataset_dir.name, route, legs)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    table = Table(
        title=f"{dataset_dir.name} · route {route} · legs {legs} · rerank {settings.rerank.model}",
        caption="cold_share: the share of queries that searched the cold tier; latency: per query, "
        "300 candidates per leg",
    )
    for key in SUMMARY_KEYS:
        table.add_row(key, f"{report[key]:.4f}" if isinstance(report[key], float) else str(report[key]))
    for kind, scores in report["by_kind"].items():  # query kinds of the set (clause, topic, …)
        table.add_row(f"{kind}: success@1 / nDCG@10", f"{scores['success@1']:.4f} / {scores['ndcg@10']:.4f}")
    Console().print(table)


def _answers(dataset_dir: Path, data_dir: Path | None, as_json: bool, overrides: dict[str, Any]) -> None:
    """``eval --answers``: every question of answers.jsonl through the answer flow (no LLM
    unless one is configured), scored as shared/tools/answers_eval.py scores the API."""
    from rag_router.cli.ingest import ingest_with_progress
    from rag_router.evaluation import answers as answer_eval
    from rag_router.evaluation.retrieval import Dataset

    if not answer_eval.is_answer_set(dataset_dir):
        fail(f"{dataset_dir} has no answers.jsonl (see data/ or a qa-* set's PROVENANCE.md)")
    temp = None if data_dir else Path(tempfile.mkdtemp(prefix="rag-eval-"))
    settings = get_settings(data_dir=data_dir or temp, **overrides)
    setup_logging(settings)

    async def run() -> dict[str, Any]:
        judged = answer_eval.load_answer_set(dataset_dir)
        async with local_services(settings) as services:
            docs = Dataset(dataset_dir, {}, {}, {}).corpus()
            await ingest_with_progress(services, docs, "auto")
            ask = answer_eval.asker(services.answerer, sources=settings.llm.sources)
            return await answer_eval.run_answers(ask, judged)

    try:
        report = asyncio.run(run())
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    _save(report, dataset_dir.name, "auto", "answers")
    if as_json:
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    table = Table("figure", "value", title=f"{dataset_dir.name} · answers")
    for row in answer_eval.table_rows(report):
        table.add_row(*row)
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
    from rag_router.cli.ingest import ingest_with_progress
    from rag_router.evaluation.retrieval import load_dataset, run_queries

    dataset = load_dataset(path, split)
    async with local_services(settings) as services:
        ingest_report = await ingest_with_progress(services, _corpus(dataset, tier_split), tier)
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
    """The collections `datasets fetch` knows, one a line: name, MD5 (from the BEIR README),
    archive URL, what it holds."""
    # Plain lines, never wrapped: a URL or a checksum cut across lines is useless to a script
    # (`awk '{print $3}'`) and to a reader copying it alike.
    width = max(len(name) for name in CATALOGUE)
    for c in CATALOGUE.values():
        typer.echo(f"{c.name:<{width}}  {c.md5}  {c.url}  {c.about}")


@datasets.command("fetch")
def datasets_fetch(
    name: Annotated[str, typer.Argument(help="a name from `rag-router datasets list`")],
    dest: Annotated[Path, typer.Option(help="where DEST/NAME is unpacked")] = Path("datasets"),
) -> None:
    """Download a BEIR collection, check its MD5, unpack it to DEST/NAME (needs internet)."""
    collection = CATALOGUE.get(name)
    if collection is None:
        fail(f"unknown collection {name!r}; known: {', '.join(CATALOGUE)}")
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(f"{name}.zip", total=None)
        try:
            path = fetch(
                collection, dest, progress=lambda done, total: bar.update(task, completed=done, total=total)
            )
        except DatasetError as exc:
            fail(str(exc))
    console.print(f"{name}: {path}  →  rag-router eval {path}")
