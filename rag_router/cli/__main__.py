"""``python -m rag_router.cli``: the console script."""

from rag_router.cli import app

app()
