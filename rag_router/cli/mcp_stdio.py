"""mcp: the store's MCP tools over stdio, for an assistant that starts the command itself.

The tools go through the running server when there is one (found as every command finds it),
else through the store opened in this process; stdout is the protocol's, so nothing else is
printed there.
"""

from __future__ import annotations

from typing import Any

from rag_router.cli.common import api, app, setup_logging
from rag_router.cli.store import Url
from rag_router.settings import get_settings


@app.command()
def mcp(url: Url = None) -> None:
    """Serve the MCP tools (search, answer, list_documents, get_document, ingest_text) over stdio."""
    import anyio

    from rag_router.api.mcp_server import tools_server

    settings = get_settings()
    setup_logging(settings)
    with api(settings, url) as client:

        async def call(method: str, path: str, auth: str | None, kwargs: dict[str, Any]) -> Any:
            # the CLI's key (RAG_API_KEY) goes with every request, whoever asks over stdio
            return await anyio.to_thread.run_sync(lambda: client.call(method, path, **kwargs))

        tools_server(call).run("stdio")
