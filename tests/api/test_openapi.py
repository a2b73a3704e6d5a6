"""What /docs shows and what every browser asks for: no "default" group, operation ids that are
the handlers' names, a favicon (no model, no lifespan: the schema and the static routes only)."""

from __future__ import annotations

import re

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from rag_router.api import create_app
from rag_router.api.routes import ROUTERS
from rag_router.settings import Settings

TAGS = ["search", "answer", "chat", "documents", "ingestion jobs", "health", "admin"]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    return TestClient(create_app(Settings(data_dir=tmp_path_factory.mktemp("openapi"))))


def test_every_operation_has_a_named_group_and_its_handlers_name(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    handlers = {
        (re.sub(r":\w+}", "}", route.path), method.lower()): route.endpoint.__name__
        for router in ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute) and route.include_in_schema
        for method in route.methods or ()
    }
    operations = {(path, method): op for path, item in schema["paths"].items() for method, op in item.items()}
    assert operations and set(operations) == set(handlers)
    for key, op in operations.items():
        assert op["tags"] in ([tag] for tag in TAGS), (key, op.get("tags"))  # never "default"
        assert op["operationId"] == handlers[key], (key, op["operationId"])
    assert len({op["operationId"] for op in operations.values()}) == len(operations)
    assert [t["name"] for t in schema["tags"]] == TAGS
    assert operations[("/readyz", "get")]["summary"] == "Readiness"


def test_the_favicon_is_served(client: TestClient) -> None:
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.content.startswith(b"<svg") and client.get("/ui/favicon.svg").content == icon.content
    assert '<link rel="icon" href="/ui/favicon.svg"' in client.get("/").text
