"""The ``rag-router`` console script: serve · ingest · query · retier · documents · jobs · eval · datasets.

One owner of the data: a command that reads or writes the store goes through the server that
holds the data dir (found in its ``serve.json``), or the one ``--url`` / ``RAG_URL`` names, over
its HTTP API; with no server it opens the store in this process.

- ``common.py``: the app, finding the server, the one-line errors
- ``store.py``: serve, query, retier, documents, jobs
- ``ask.py``: ask (the cited answer, streamed)
- ``mcp_stdio.py``: mcp (the store's MCP tools over stdio)
- ``ingest.py``: ingest, in process, on Ray, or handed to ``upload.py`` (a server's jobs, jobs follow)
- ``report.py``: an ingest's summary and progress bar, however it ran
- ``evaluation.py``: eval, datasets
- ``llm.py``: llm serve (a local model over the OpenAI API, llama.cpp)
"""

from __future__ import annotations

from rag_router.cli import ask, evaluation, ingest, llm, mcp_stdio, store, upload  # noqa: F401  (each registers its commands)
from rag_router.cli.common import app

__all__ = ["app"]
