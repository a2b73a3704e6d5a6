"""A small Python client of the REST API (what the CLI uses against a running server).

Every method is one request; a non-2xx answer raises ``ApiError`` with the envelope's code and
message. ``Client`` wraps any ``httpx.Client``: a real one for a server, or Starlette's
``TestClient`` for the app in this process (the CLI without a server).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from httpx_sse import connect_sse


class ApiError(Exception):
    """The service answered with an error envelope (or not at all)."""

    def __init__(
        self, status: int, code: str, message: str, failures: list[dict[str, str]] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.failures = failures or []  # an upload's files that could not be read: {"id", "error"}


class Client:
    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    @classmethod
    def connect(cls, url: str, api_key: str | None = None, timeout_s: float = 120.0) -> Client:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        return cls(httpx.Client(base_url=url, headers=headers, timeout=timeout_s))

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request: its JSON body, or ``ApiError`` (an error answer, or no answer at all)."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(0, "unreachable", f"{self.http.base_url}: {exc}") from exc
        if response.status_code >= 400:
            raise error_of(response)
        return response.json()

    def healthy(self) -> bool:
        try:
            return self.http.get("/healthz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def ready(self) -> dict[str, Any]:
        response = self.http.get("/readyz")
        return response.json()  # type: ignore[no-any-return]  # 503 carries the same body

    def search(self, query: str, *, top_k: int = 10, route: str = "auto") -> dict[str, Any]:
        return self.call("POST", "/v1/search", json={"query": query, "top_k": top_k, "route": route})  # type: ignore[no-any-return]

    def answer_events(self, query: str, *, top_k: int = 5, route: str = "auto") -> Iterator[tuple[str, Any]]:
        """``POST /v1/answer`` streamed: (event, data) for route, hits, token…, done; an ``error``
        event raises ``ApiError`` as an error answer would."""
        body = {"query": query, "top_k": top_k, "route": route, "stream": True}
        for event, data in self._stream("POST", "/v1/answer", json=body):
            if event == "error":
                error = data.get("error", {})
                raise ApiError(500, str(error.get("code", "error")), str(error.get("message", data)))
            yield event, data

    def upload(self, files: Sequence[tuple[str, Path]], *, tier: str = "auto", **form: str) -> dict[str, Any]:
        """``files``: (the name the document id comes from, the local file). One job. ``form``:
        ``tenant`` (servers without API keys), ``id_field``, ``text_field``, ``title_field``."""
        handles = [(name, path.open("rb")) for name, path in files]
        try:
            parts = [("files", (name, handle, "application/octet-stream")) for name, handle in handles]
            data = {"tier": tier, **form}
            return self.call("POST", "/v1/ingest/files", files=parts, data=data)  # type: ignore[no-any-return]
        finally:
            for _, handle in handles:
                handle.close()

    def job(self, job_id: str) -> dict[str, Any]:
        return self.call("GET", f"/v1/ingest/jobs/{job_id}")  # type: ignore[no-any-return]

    def jobs(self) -> list[dict[str, Any]]:
        return self.call("GET", "/v1/ingest/jobs")["jobs"]  # type: ignore[no-any-return]

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self.call("DELETE", f"/v1/ingest/jobs/{job_id}")  # type: ignore[no-any-return]

    def events(self, job_id: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """The job's progress events, until its ``done`` event."""
        yield from self._stream("GET", f"/v1/ingest/jobs/{job_id}/events")

    def _stream(self, method: str, path: str, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        """An SSE response's (event, JSON data); an error answer or a lost connection: ``ApiError``."""
        try:
            with connect_sse(self.http, method, path, timeout=None, **kwargs) as source:
                if source.response.status_code >= 400:
                    source.response.read()
                    raise error_of(source.response)
                for event in source.iter_sse():
                    yield event.event, json.loads(event.data)
        except httpx.HTTPError as exc:
            raise ApiError(0, "unreachable", f"{self.http.base_url}: {exc}") from exc

    def retier(self, *, dry_run: bool = False) -> dict[str, Any]:
        return self.call("POST", "/v1/retier", json={"dry_run": dry_run})  # type: ignore[no-any-return]

    def documents(
        self, *, limit: int = 50, cursor: str | None = None, **filters: str | None
    ) -> dict[str, Any]:
        """One page of the stored documents (``GET /v1/documents``); ``filters``: ``tier``, ``source``,
        ``date_gte``, ``date_lte``, ``title_prefix``. The next page: ``cursor=page["next_cursor"]``."""
        params = {"limit": limit, "cursor": cursor, **filters}
        given = {k: v for k, v in params.items() if v is not None}
        return self.call("GET", "/v1/documents", params=given)  # type: ignore[no-any-return]

    def document(self, doc_id: str) -> dict[str, Any]:
        return self.call("GET", document_path(doc_id))  # type: ignore[no-any-return]

    def delete_document(self, doc_id: str) -> dict[str, Any]:
        return self.call("DELETE", document_path(doc_id))  # type: ignore[no-any-return]

    def delete_where(self, where: Sequence[str]) -> dict[str, Any]:
        """``DELETE /v1/documents?where=key=value…``: every document whose metadata matches."""
        return self.call("DELETE", "/v1/documents", params=[("where", w) for w in where])  # type: ignore[no-any-return]

    def close(self) -> None:
        self.http.close()


def document_path(doc_id: str) -> str:
    """The document's URL path: every character that means something in a URL escaped ("#", "?",
    "%", spaces), "/" kept; ids with "." or ".." segments are refused here as the server refuses
    them at ingestion (a URL would resolve them to another document)."""
    if any(part in (".", "..") for part in doc_id.split("/")):
        raise ApiError(422, "invalid_id", f"no document id has a '.' or '..' segment: {doc_id!r}")
    return "/v1/documents/" + quote(doc_id, safe="/")


def error_of(response: httpx.Response) -> ApiError:
    try:
        body = response.json()["error"]
        failures = [f for f in body.get("failures") or [] if isinstance(f, dict)]
        return ApiError(response.status_code, str(body["code"]), str(body["message"]), failures)
    except (ValueError, KeyError, TypeError):
        return ApiError(
            response.status_code, "http_error", f"HTTP {response.status_code}: {response.text[:200]}"
        )
