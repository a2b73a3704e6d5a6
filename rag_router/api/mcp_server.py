"""The store as MCP tools (the official ``mcp`` SDK): search, answer, list_documents,
get_document, ingest_text — for coding assistants and agent frameworks.

Every tool is one call of the REST API, made with the caller's credentials, so tenants, keys,
limits and errors are the REST API's own: over HTTP (``/mcp`` on the service, Streamable HTTP,
stateless) the request's ``Authorization`` header goes with the call; over stdio
(``rag-router mcp``) the CLI's ``RAG_API_KEY`` does, against the running server or the store
opened in that process. An error answer becomes the tool's error, with the envelope's message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from rag_router import __version__

# (method, path, authorization header or None, httpx keyword arguments) → the JSON body; an
# error answer raises ``ApiError`` (rag_router.client)
Call = Callable[[str, str, str | None, dict[str, Any]], Awaitable[Any]]

INSTRUCTIONS = (
    "A hybrid retrieval service over the user's stored documents (English and Chinese). Use "
    "`answer` for a cited answer to a question, `search` for the passages themselves, "
    "`list_documents`/`get_document` to browse, `ingest_text` to store a new document."
)
PASSAGE_CHARS = 1200  # of each search hit's text in a tool result


def tools_server(call: Call) -> MCPServer:
    """An MCP server whose tools go through ``call``."""
    server: MCPServer = MCPServer(name="rag-router", version=__version__, instructions=INSTRUCTIONS)

    async def rest(ctx: Context, method: str, path: str, **kwargs: Any) -> Any:
        from rag_router.client import ApiError

        request = ctx.request_context.request
        headers = getattr(request, "headers", None)
        auth = headers.get("authorization") if headers is not None else None
        try:
            return await call(method, path, auth, kwargs)
        except ApiError as exc:
            raise ToolError(f"{exc.code}: {exc.message}") from exc

    def tool(fn: Any) -> Any:
        """Registered with its docstring on one line (the wrapping is the source's, not the text's)."""
        return server.tool(description=" ".join((fn.__doc__ or "").split()))(fn)

    @tool
    async def search(ctx: Context, query: str, top_k: int = 5, route: str = "auto") -> dict[str, Any]:
        """Search the stored documents: the best passages for the query, with their document
        id, title, clause metadata and score. route: auto | hot | cold | both."""
        body = await rest(ctx, "POST", "/v1/search", json={"query": query, "top_k": top_k, "route": route})
        return {
            "hits": [
                {
                    "doc_id": h["doc_id"],
                    "chunk_id": h["chunk_id"],
                    "title": h["title"],
                    "text": h["text"][:PASSAGE_CHARS],
                    "score": h["score"],
                    "metadata": h["metadata"],
                    "relevant": h["relevant"],
                }
                for h in body["hits"]
            ],
            "route": body["route"]["reason"],
        }

    @tool
    async def answer(ctx: Context, query: str, history: list[str] | None = None) -> dict[str, Any]:
        """Answer a question from the stored documents, with [n] citations; declines (abstained:
        true) when nothing stored is relevant. history: the conversation's earlier questions,
        oldest first, for follow-ups such as "And Article 18?"."""
        body = await rest(ctx, "POST", "/v1/answer", json={"query": query, "history": history or []})
        hits = {h["chunk_id"]: h for h in body["hits"]}
        return {
            "answer": body["answer"],
            "abstained": body["abstained"],
            "citations": [
                {"n": c["n"], "doc_id": c["doc_id"], "title": hits.get(c["chunk_id"], {}).get("title")}
                for c in body["citations"]
            ],
            "notes": body["notes"],
        }

    @tool
    async def list_documents(ctx: Context, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
        """The stored documents by id, a page at a time (next_cursor: the next page)."""
        params = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        return await rest(ctx, "GET", "/v1/documents", params=params)  # type: ignore[no-any-return]

    @tool
    async def get_document(ctx: Context, doc_id: str) -> dict[str, Any]:
        """One stored document: its text (as ingested), title, metadata and tiers."""
        from rag_router.client import document_path

        body = await rest(ctx, "GET", document_path(doc_id))
        return {k: body[k] for k in ("id", "title", "text", "metadata", "tiers")}

    @tool
    async def ingest_text(
        ctx: Context,
        text: str,
        title: str | None = None,
        doc_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Store one document (the id defaults to a content hash); answered once it is durable."""
        doc = {"text": text, "title": title, "id": doc_id, "metadata": metadata or {}}
        body = await rest(ctx, "POST", "/v1/documents", json={"documents": [doc]})
        return body["results"][0]  # type: ignore[no-any-return]

    return server


def mount(app: Any) -> Any:
    """The tools at ``/mcp`` on ``app`` (Streamable HTTP, stateless, JSON answers), each calling
    the app's own REST API in process with the request's credentials. Returns the session
    manager, whose ``run()`` the app's lifespan holds open."""
    import httpx
    from mcp.server.transport_security import TransportSecuritySettings

    from rag_router.client import error_of

    async def call(method: str, path: str, auth: str | None, kwargs: dict[str, Any]) -> Any:
        headers = {"Authorization": auth} if auth else {}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rag-router", timeout=None) as http:
            response = await http.request(method, path, headers=headers, **kwargs)
        if response.status_code >= 400:
            raise error_of(response)
        return response.json()

    server = tools_server(call)
    # The host check guards a server on loopback against DNS rebinding from a browser; this one
    # answers on whatever address `serve` binds, behind API keys like the REST routes.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    starlette = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, transport_security=security
    )
    app.router.routes.extend(starlette.routes)
    return server.session_manager
