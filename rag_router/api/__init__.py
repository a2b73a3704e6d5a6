"""The REST service: ``create_app(settings)``."""

from rag_router.api.app import create_app

__all__ = ["create_app"]
