"""serve · query · retier · documents · jobs · hash-key: the store's commands, through its owner's API."""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import logging
import re
import sys
import textwrap
from collections.abc import Callable
from typing import Annotated, Any

import typer

from rag_router.cli.common import api, app, console, setup_logging, visible, where
from rag_router.cli.group import fail
from rag_router.client import ApiError, Client
from rag_router.owner import current_owner, holding
from rag_router.settings import Settings, get_settings, shared_store

log = logging.getLogger(__name__)
Url = Annotated[
    str | None, typer.Option("--url", help="a running server (default: RAG_URL, or the data dir's)")
]

documents = typer.Typer(no_args_is_help=True, help="Stored documents: list, get, delete.")
jobs = typer.Typer(no_args_is_help=True, help="Ingestion jobs: list, get, follow, cancel.")
app.add_typer(documents, name="documents")
app.add_typer(jobs, name="jobs")


@app.command()
def serve(
    host: Annotated[
        str | None,
        typer.Option(help=f"bind address (default: RAG_HOST, {Settings.model_fields['host'].default})"),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help=f"port (default: RAG_PORT, {Settings.model_fields['port'].default})")
    ] = None,
    local_llm: Annotated[
        bool, typer.Option("--local-llm", help="answer with `rag-router llm serve`'s model, run beside it")
    ] = False,
) -> None:
    """Run the REST service (it owns the data dir while it runs; other commands go through it)."""
    settings = get_settings()
    setup_logging(settings, command=False)
    if not local_llm:
        _serve(settings, host, port)
        return
    from rag_router.cli.llm import beside

    with beside(settings) as answering:
        _serve(answering, host, port)


def _serve(settings: Settings, host: str | None, port: int | None) -> None:
    import uvicorn

    from rag_router.api.app import create_app

    # Measured at 64 clients (docs/benchmarks.md): with CPython's default thresholds (700, 10,
    # 10) the collector ran every few requests and walked the models' heap, stalling the event
    # loop up to 265 ms; fewer young collections and a frozen startup heap gave +20-30 %
    # throughput and a quarter of the stalls.
    gc.set_threshold(50_000, 50, 100)
    host, port = host or settings.host, port or settings.port
    # The embedded engines are one process's: the server owns the data dir and says so. With both
    # tiers on servers, replicas may share it (behind a load balancer; RAG_JOBS__URL for the jobs).
    shared = shared_store(settings)
    owner = None if shared else current_owner(settings.data_dir)
    if owner is not None:
        fail(owner.describe(settings.data_dir))
    owning = contextlib.nullcontext() if shared else holding(settings.data_dir, f"http://{host}:{port}")
    with owning:
        config = uvicorn.Config(
            create_app(settings, freeze_gc=True),
            host=host,
            port=port,
            log_level=settings.log_level.lower(),
            access_log=settings.access_log,
        )
        server = _server(config, f"rag-router ready at http://{host}:{port} (data dir {settings.data_dir})")
        server.run()
        if not server.started:  # the store opened, the socket did not (uvicorn has said why)
            raise typer.Exit(3)


def _server(config: Any, ready: str) -> Any:
    """uvicorn's server, saying ``ready`` once its socket is bound (the lifespan runs before)."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                log.info(ready)

    return Server(config)


def with_client(url: str | None, run: Callable[[Client], Any]) -> Any:
    """Run one API call where the data is (a server, or this process); an error answer is one line."""
    settings = get_settings()
    setup_logging(settings)
    try:
        with api(settings, url) as client:
            return run(client)
    except ApiError as exc:
        fail(exc.message)


@app.command()
def query(
    text: Annotated[str, typer.Argument(help="the question")],
    route: Annotated[str, typer.Option(help="auto | hot | cold | both")] = "auto",
    top_k: Annotated[int, typer.Option(min=1, max=100)] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="print the response as JSON")] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="print the route, its reason and the features")
    ] = False,
    url: Url = None,
) -> None:
    """Run one query and print the hits with their sources."""
    from rag_router.api.schemas import SearchResponse

    def search(client: Client) -> tuple[dict[str, Any], dict[str, Any] | None]:
        body = client.search(text, top_k=top_k, route=route)
        return body, None if body["hits"] else client.ready()  # no hits: is the index empty?

    body, ready = with_client(url, search)
    response = SearchResponse.model_validate(body)
    if ready is not None and not any(b.get("chunks") for b in ready.get("backends", {}).values()):
        console.print(
            f"[yellow]the index at {where(get_settings(), url)} is empty: ingest documents first "
            "with `rag-router ingest PATH` or set RAG_DATA_DIR[/yellow]",
            highlight=False,
            soft_wrap=True,
        )
    if as_json:
        typer.echo(response.model_dump_json(indent=2))
        return
    typer.echo(f"route: {', '.join(response.route.tiers)} — {response.route.reason}")
    if explain:
        typer.echo(f"filters: {json.dumps(response.route.filters, ensure_ascii=False)}")
        typer.echo(f"features: {json.dumps(response.route.features, ensure_ascii=False)}")
    for n, hit in enumerate(response.hits, 1):
        title = f" — {hit.title}" if hit.title else ""
        typer.echo(visible(f"[{n}] {hit.doc_id}{title} ({hit.tier}, score {hit.score:.4f})"))
        typer.echo(textwrap.indent(visible(snippet(hit.text.strip())), "    "))


_IDEOGRAPH = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
_SPACE = re.compile(r"\s")


def snippet(text: str, limit: int = 300) -> str:
    """At most ``limit`` characters of ``text``, cut between words with "…" after them.

    Chinese and Japanese put no spaces between words, so there any two characters are a boundary;
    elsewhere the cut goes back to the last space (unless that would lose over half of it).
    """
    if len(text) <= limit:
        return text
    head, rest = text[:limit], text[limit:]
    inside = head[-1].isalnum() and rest[0].isalnum()
    if inside and not (_IDEOGRAPH.match(head[-1]) or _IDEOGRAPH.match(rest[0])):
        spaces = [m.start() for m in _SPACE.finditer(head)]
        if spaces and spaces[-1] > limit // 2:
            head = head[: spaces[-1]]
    return head.rstrip() + "…"


@app.command()
def retier(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only count what would move")] = False,
    url: Url = None,
) -> None:
    """Move documents that aged out of the hot window to the cold tier (copy → verify → delete)."""
    report = with_client(url, lambda c: c.retier(dry_run=dry_run))
    verb = "would move" if dry_run else "moved"
    moved = report["aged"] if dry_run else report["moved"]
    typer.echo(f"{report['aged']} documents past the hot window; {verb} {moved}")  # what a script reads
    if not dry_run:
        typer.echo(f"{chunks(report['chunks'])} moved to the cold tier")
    for error in report["errors"]:
        console.print(f"[red]{error}[/red]")
    if report["errors"]:
        raise typer.Exit(1)


@documents.command("get")
def documents_get(
    doc_id: Annotated[str, typer.Argument(help="the document id")],
    as_json: Annotated[bool, typer.Option("--json", help="the whole response, chunks included")] = False,
    url: Url = None,
) -> None:
    """Print a stored document's text (byte for byte as ingested), or all of it as JSON."""
    body = with_client(url, lambda c: c.document(doc_id))
    if as_json:
        typer.echo(json.dumps(body, ensure_ascii=False, indent=2))
        return
    title = f" — {body['title']}" if body.get("title") else ""
    header = f"{body['id']}{title} · {', '.join(body['tiers'])} · {chunks(len(body['chunks']))}"
    console.print(visible(header), style="dim", markup=False, highlight=False)
    typer.echo(body["text"], nl=False)  # byte for byte: no newline of ours after it


@documents.command("delete")
def documents_delete(
    doc_id: Annotated[str | None, typer.Argument(help="the document id")] = None,
    where: Annotated[
        list[str] | None,
        typer.Option(help="instead of an id: every document whose metadata has key=value (repeatable)"),
    ] = None,
    url: Url = None,
) -> None:
    """Remove a document from every tier, or every one matching --where (e.g. dataset=sample)."""
    if (doc_id is None) == (not where):
        fail("give a document id or --where key=value, not both")
    if where:
        found = with_client(url, lambda c: c.delete_where(where))
        n = found["deleted_documents"]
        typer.echo(f"deleted {n} document{'' if n == 1 else 's'} ({chunks(found['deleted_chunks'])})")
        return
    body = with_client(url, lambda c: c.delete_document(str(doc_id)))
    typer.echo(f"deleted {body['id']}: {chunks(body['deleted_chunks'])}")


@documents.command("list")
def documents_list(
    tier: Annotated[str | None, typer.Option(help="only this tier's documents: hot | cold")] = None,
    title_prefix: Annotated[str | None, typer.Option(help="titles that start with this, any case")] = None,
    source: Annotated[str | None, typer.Option(help="only documents with this source")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="documents per page")] = 50,
    cursor: Annotated[str | None, typer.Option(help="the next page (printed under the last one)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the response as JSON")] = False,
    url: Url = None,
) -> None:
    """List stored documents by id, a page at a time: id, tiers, chunks, date, title."""
    filters = {"tier": tier, "title_prefix": title_prefix, "source": source}
    body = with_client(url, lambda c: c.documents(limit=limit, cursor=cursor, **filters))
    if as_json:
        typer.echo(json.dumps(body, ensure_ascii=False, indent=2))
        return
    for d in body["documents"]:  # tab-separated: one document a line, whole, for scripts
        fields = [d["id"], ",".join(d["tiers"]), str(d["chunks"]), d["date"] or "-", d["title"] or ""]
        typer.echo(visible("\t".join(fields)))
    shown = f"{len(body['documents'])} of {body['total']} documents"
    more = f"; next page: --cursor {body['next_cursor']}" if body["next_cursor"] else ""
    console.print(f"[dim]{shown}{more}[/dim]", highlight=False, soft_wrap=True)


def chunks(n: int) -> str:
    """ "1 chunk", "2 chunks"."""
    return f"{n} chunk{'' if n == 1 else 's'}"


JOBS_HEADER = f"{'JOB':<32}  {'STATUS':<10}  {'CREATED':<19}  {'UPDATED':<19}  PROGRESS"


def job_line(j: dict[str, Any]) -> str:
    """One job per line, its id whole (to paste into `jobs get|follow|cancel`) at any width."""
    eta = "" if j["eta_s"] is None or j["status"] != "running" else f", eta {j['eta_s']:.0f} s"
    return (
        f"{j['job_id']:<32}  {j['status']:<10}  {_local_time(j['created_at'])}  "
        f"{_local_time(j['updated_at'])}  {j['done']}/{j['total']} done, {j['failed']} failed, "
        f"{j['chunks_per_s']:.1f} chunks/s{eta}"
    )


def _local_time(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s).strftime("%Y-%m-%d %H:%M:%S")


@jobs.command("list")
def jobs_list(url: Url = None) -> None:
    """The latest ingestion jobs, newest first (times are this machine's local time)."""
    found = with_client(url, Client.jobs)
    if not found:
        typer.echo("no ingestion jobs")
        return
    typer.echo(JOBS_HEADER)
    for job in found:
        typer.echo(job_line(job))


@jobs.command("get")
def jobs_get(job_id: str, url: Url = None) -> None:
    """One job's progress, as JSON."""
    typer.echo(json.dumps(with_client(url, lambda c: c.job(job_id)), indent=2))


@jobs.command("cancel")
def jobs_cancel(job_id: str, url: Url = None) -> None:
    """Cancel a queued or running job (a running one stops between batches)."""
    body = with_client(url, lambda c: c.cancel(job_id))
    written = f"{body['done']} of {body['total']} documents written"
    if body["status"] in ("running", "cancelling"):
        console.print(f"{job_id}: cancelling, it stops after the batch in flight ({written} so far)")
    else:
        console.print(f"{job_id}: {body['status']} ({written})")


@app.command("hash-key")
def hash_key_command(
    key: Annotated[str | None, typer.Argument(help="the key; read from stdin when left out")] = None,
    tenant: Annotated[str | None, typer.Option(help="prefix the entry with this tenant")] = None,
) -> None:
    """Print the entry to put in RAG_API_KEYS or the keys file instead of the key itself."""
    from rag_router.api.keys import hash_key

    given = key if key is not None else sys.stdin.readline().strip()
    if not given:
        fail("no key given (an argument, or one line on stdin)")
    entry = hash_key(given)
    typer.echo(f"{tenant}:{entry}" if tenant else entry)
