"""rag-router: the query-time brain and the service."""

__version__ = "0.1.0"
