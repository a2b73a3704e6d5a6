"""Property-based fuzzing of the whole HTTP API with schemathesis, against a real server process.

Every operation in the OpenAPI schema gets 100 generated requests that fit the schema and 100
that do not, sent with a valid key, and 100 more sent with no key or a wrong one. Checks: no 5xx,
every response valid against the schema the service publishes (schemathesis' own checks), every
non-2xx body in the one error envelope, and nothing but 401 without a valid key (except the
operations that are public by design).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from rag_router.api import create_app
from rag_router.settings import Settings
from tests.crash.test_sigkill import free_port, server

KEY = "fuzz-key-1"
PUBLIC = frozenset({"/healthz", "/readyz", "/metrics"})
ENVELOPE_KEYS = {"code", "message", "type", "request_id"}
EXAMPLES = 100
# The schema as the service publishes it (built without starting the service).
SCHEMA = schemathesis.openapi.from_dict(create_app(Settings(data_dir=Path("/nonexistent"))).openapi())
OPERATIONS = {op.label: op for op in (r.ok() for r in SCHEMA.get_all_operations())}
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("fuzz")
    port = free_port()
    with server(root / "data", port, RAG_API_KEYS=json.dumps([f"acme:{KEY}"])):
        url = f"http://127.0.0.1:{port}"
        docs = [
            {
                "id": "law/1",
                "title": "Data law",
                "text": "Article 1. Everyone has the right to the protection of personal data.",
            },
            {
                "id": "n2",
                "text": "Revenue rose in 2021 after the merger.",
                "metadata": {"date": "2021-03-01"},
            },
        ]
        r = httpx.post(f"{url}/v1/documents", json={"documents": docs}, headers=_auth(KEY), timeout=120)
        assert r.status_code == 200, r.text
        yield url


def _auth(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key is not None else {}


def _envelope(response: Any) -> None:
    if response.status_code < 400:
        return
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) >= ENVELOPE_KEYS, body
    assert all(isinstance(body["error"][k], str) for k in ENVELOPE_KEYS), body


def _breakable(op: Any) -> bool:
    """Requests that break the schema can only be made where there is a body or a query to break
    (a path parameter is any string; the other operations take no input)."""
    query = [p for p in op.definition.raw.get("parameters", []) if p.get("in") == "query"]
    return "requestBody" in op.definition.raw or bool(query)


CASES = [(label, GenerationMode.POSITIVE) for label in sorted(OPERATIONS)] + [
    (label, GenerationMode.NEGATIVE) for label, op in sorted(OPERATIONS.items()) if _breakable(op)
]


@pytest.mark.parametrize(("label", "mode"), CASES, ids=[f"{m.value}-{label}" for label, m in CASES])
def test_with_a_valid_key(label: str, mode: GenerationMode, base_url: str) -> None:
    @FUZZ
    @given(case=OPERATIONS[label].as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        sent.append(case)
        # Every schemathesis check but one: a request the schema allows may still be refused
        # (422) for what a schema cannot say (a filter on a field that is not filterable; a
        # chat without a user message); it must then be refused in the envelope (checked below).
        response = case.call_and_validate(
            base_url=base_url,
            headers=_auth(KEY),
            timeout=120,
            excluded_checks=[schemathesis.checks.positive_data_acceptance],
        )
        _envelope(response)

    sent: list[Any] = []
    run()
    _report(label, mode.value, sent)


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_without_a_valid_key(label: str, base_url: str) -> None:
    @FUZZ
    @given(case=OPERATIONS[label].as_strategy(), key=st.sampled_from([None, "", "wrong", KEY + "x"]))
    def run(case: Any, key: str | None) -> None:
        sent.append(case)
        response = case.call(base_url=base_url, headers=_auth(key), timeout=120)
        assert response.status_code < 500, (response.status_code, response.text)
        _envelope(response)
        if case.path in PUBLIC:
            return
        if response.status_code == 404:  # only the router's: a path no route matches ("/v1/documents/")
            assert response.json()["error"]["message"].startswith("Not Found: no "), response.text
            return
        assert response.status_code == 401, (response.status_code, response.text)

    sent: list[Any] = []
    run()
    _report(label, "no valid key", sent)


# Operations with a handful of possible requests, which hypothesis stops after trying them all:
# no input at all, or only {"dry_run": true|false}.
FINITE = frozenset({"GET /healthz", "GET /readyz", "GET /metrics", "GET /v1/ingest/jobs", "POST /v1/retier"})


def _report(label: str, mode: str, sent: list[Any]) -> None:
    print(f"fuzzed {label} ({mode}): {len(sent)} requests")
    if label not in FINITE or mode == "negative":
        assert len(sent) >= EXAMPLES, (label, mode, len(sent))
