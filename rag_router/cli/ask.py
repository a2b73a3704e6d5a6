"""ask: the cited answer in the terminal, streamed as it is written, through the store's owner.

Exit status: 0 answered, 4 declined (nothing stored clears the relevance floor, or the clause
asked for is not stored), 2 an error the user can fix (one line on stderr).
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from rag_router.cli.common import app, console, visible
from rag_router.cli.store import Url, with_client
from rag_router.client import Client

DECLINED = 4  # the exit status of a declined question


@app.command()
def ask(
    text: Annotated[
        str, typer.Argument(help="the question, with any constraint ('in one sentence', '不超过50字')")
    ],
    route: Annotated[str, typer.Option(help="auto | hot | cold | both")] = "auto",
    top_k: Annotated[int, typer.Option(min=1, max=100, help="hits the answer may cite")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="print the whole response as JSON")] = False,
    url: Url = None,
) -> None:
    """Answer a question from the stored documents, with numbered citations (exit 4: declined)."""
    stream = not as_json and sys.stdout.isatty()

    def run(client: Client) -> dict[str, Any]:
        streamed: list[str] = []
        final: dict[str, Any] = {}
        for event, data in client.answer_events(text, top_k=top_k, route=route):
            if event == "token" and stream:
                streamed.append(data["text"])
                typer.echo(visible(data["text"]), nl=False)
            elif event == "done":
                final = data
        if streamed:
            typer.echo()
            if "".join(streamed).strip() != (final.get("answer") or "").strip():
                # the checks after generation changed what was written: the checked answer counts
                console.print("[dim]checked against the sources, the answer is:[/dim]", highlight=False)
                typer.echo(visible(final.get("answer") or ""))
        return final

    body = with_client(url, run)
    if as_json:
        typer.echo(json.dumps(body, ensure_ascii=False, indent=2))
    else:
        if not stream:
            typer.echo(visible(body.get("answer") or ""))
        _report(body)
    if body.get("abstained"):
        raise typer.Exit(DECLINED)


def _report(body: dict[str, Any]) -> None:
    """The sources under the answer (id, title, clause or page), or why it was declined."""
    for note in body.get("notes") or []:
        console.print(f"[yellow]note:[/yellow] {visible(note)}", highlight=False, soft_wrap=True)
    if body.get("abstained"):
        reason = body["route"]["reason"]  # its last step says why ("declined: …" or the clause missing)
        reason = reason.rpartition("declined: ")[2] if "declined: " in reason else reason.rpartition("; ")[2]
        console.print(f"[dim]declined: {visible(reason)}[/dim]", highlight=False, soft_wrap=True)
        return
    hits = {h["chunk_id"]: h for h in body.get("hits") or []}
    for citation in body.get("citations") or []:
        hit = hits.get(citation["chunk_id"], {})
        typer.echo(visible(f"[{citation['n']}] {citation['doc_id']}{_where(hit)}"))


def _where(hit: dict[str, Any]) -> str:
    """' — Title, Article 5, page 2': what a reader needs to find the passage."""
    meta = hit.get("metadata") or {}
    parts = [hit["title"]] if hit.get("title") else []
    for key in ("article", "section", "page"):
        label = f"{key} {meta[key]}" if meta.get(key) is not None else None
        if label and label.lower() not in str(hit.get("title") or "").lower():  # not twice
            parts.append(label)
    return f" — {', '.join(str(p) for p in parts)}" if parts else ""
