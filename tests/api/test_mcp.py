"""The MCP tools, through the SDK's own client: over HTTP on a real server (with API keys: each
key its tenant's documents, a missing key the REST API's error) and over stdio (`rag-router mcp`
on a store opened in that process)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.crash.test_sigkill import free_port, server

TOOLS = ["search", "answer", "list_documents", "get_document", "ingest_text"]
DOCS = [
    {"id": "leave", "title": "Leave policy", "text": "Staff receive 28 days of paid annual leave a year."},
    {"id": "parking", "title": "Parking", "text": "A staff parking permit costs 35 EUR per month."},
]


def run(session: Any, act: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with Client(session) as client:
            return await act(client)

    return asyncio.run(main())


def run_http(url: str, key: str | None, act: Callable[[Client], Awaitable[Any]]) -> Any:
    """The SDK's Streamable HTTP client with the key as a bearer token (its HTTP client is ours
    to close: the transport leaves a client it was given open)."""
    headers = {"Authorization": f"Bearer {key}"} if key else None

    async def main() -> Any:
        async with (
            create_mcp_http_client(headers=headers) as http_client,
            Client(streamable_http_client(f"{url}/mcp", http_client=http_client)) as client,
        ):
            return await act(client)

    return asyncio.run(main())


@pytest.mark.slow
def test_the_tools_over_http_are_the_rest_api_with_the_callers_key(tmp_path: Path) -> None:
    port = free_port()
    keys = json.dumps(["red:key-red-71", "blue:key-blue-71"])
    with server(tmp_path / "data", port, RAG_API_KEYS=keys):
        url = f"http://127.0.0.1:{port}"
        stored = httpx.post(
            f"{url}/v1/documents", json={"documents": DOCS}, headers={"Authorization": "Bearer key-red-71"}
        )
        assert stored.status_code == 200, stored.text

        async def red(client: Client) -> dict[str, Any]:
            tools = [t.name for t in (await client.list_tools()).tools]
            found = await client.call_tool("search", {"query": "parking permit price", "top_k": 2})
            answered = await client.call_tool("answer", {"query": "How many days of paid leave?"})
            added = await client.call_tool(
                "ingest_text", {"text": "The gym opens at 6:30.", "doc_id": "gym", "title": "Gym"}
            )
            listed = await client.call_tool("list_documents", {})
            got = await client.call_tool("get_document", {"doc_id": "gym"})
            missing = await client.call_tool("get_document", {"doc_id": "nope"})
            return {
                "tools": tools,
                "found": found.structured_content,
                "answered": answered.structured_content,
                "added": added.structured_content,
                "listed": listed.structured_content,
                "got": got.structured_content,
                "missing": missing,
            }

        seen = run_http(url, "key-red-71", red)
        assert seen["tools"] == TOOLS
        assert seen["found"]["hits"][0]["doc_id"] == "parking"
        assert (
            "28 days" in seen["answered"]["answer"] and seen["answered"]["citations"][0]["doc_id"] == "leave"
        )
        assert seen["added"]["status"] == "created"
        assert sorted(d["id"] for d in seen["listed"]["documents"]) == ["gym", "leave", "parking"]
        assert seen["got"]["text"] == "The gym opens at 6:30."  # byte for byte
        assert seen["missing"].is_error and "not_found" in seen["missing"].content[0].text

        async def blue(client: Client) -> Any:
            return (await client.call_tool("list_documents", {})).structured_content

        assert run_http(url, "key-blue-71", blue)["documents"] == []  # another tenant's store

        async def anonymous(client: Client) -> Any:
            return await client.call_tool("search", {"query": "leave"})

        refused = run_http(url, None, anonymous)
        assert refused.is_error and "unauthorized" in refused.content[0].text


@pytest.mark.slow
def test_the_tools_over_stdio_on_a_store_opened_in_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**os.environ, "RAG_DATA_DIR": str(data), "RAG_LOG_LEVEL": "WARNING"}
    port = free_port()
    with server(data, port):  # the store made, then let go (SIGKILL: its serve.json is stale)
        httpx.post(f"http://127.0.0.1:{port}/v1/documents", json={"documents": DOCS}, timeout=120)
    params = StdioServerParameters(command=sys.executable, args=["-m", "rag_router.cli", "mcp"], env=env)

    async def act(client: Client) -> Any:
        found = await client.call_tool("search", {"query": "paid annual leave", "top_k": 1})
        return found.structured_content

    found = run(params, act)
    assert found["hits"][0]["doc_id"] == "leave"
