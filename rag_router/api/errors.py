"""The one status table and the one envelope: every non-2xx body is

{"error": {"code": str, "message": str, "type": str, "request_id": str}}
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag_router.errors import (
    BackendUnavailable,
    InsufficientStorage,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RagError,
    RateLimited,
    Unauthorized,
)
from rag_router.services import EngineError, service_error

log = logging.getLogger(__name__)

STATUS: dict[type[RagError], int] = {
    InvalidRequest: 422,
    NotFound: 404,
    PayloadTooLarge: 413,
    Unauthorized: 401,
    BackendUnavailable: 503,
    InsufficientStorage: 507,
    RateLimited: 429,
}
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large", 401: "unauthorized"}


def status_of(exc: RagError) -> int:
    """The HTTP status of a service error (the one table: ``STATUS``)."""
    return next((s for cls, s in STATUS.items() if isinstance(exc, cls)), 500)


def error_response(request: Request, exc: RagError) -> JSONResponse:
    """A service error as its envelope (Retry-After on 503)."""
    status = status_of(exc)
    retry = isinstance(exc, (BackendUnavailable, InsufficientStorage, RateLimited))
    headers = {"Retry-After": str(exc.retry_after_s)} if retry else None  # type: ignore[attr-defined]
    kind = "client_error" if status < 500 else "server_error"
    response = envelope(request, status, exc.code, exc.message, kind, headers)
    failures = getattr(exc, "failures", None)
    if failures:  # one line per file a client can show: the envelope's fields, and these
        body = json.loads(bytes(response.body))
        body["error"]["failures"] = failures
        response = JSONResponse(body, status_code=status, headers=headers)
    return response


def request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", "-"))


def envelope(
    request: Request, status: int, code: str, message: str, kind: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "type": kind, "request_id": request_id(request)}}
    return JSONResponse(body, status_code=status, headers=headers)


def _describe(errors: Any) -> str:
    parts = []
    for err in errors:
        if err.get("type") == "json_invalid":  # loc is ("body", character offset)
            at = err.get("loc", ())[-1]
            reason = (err.get("ctx") or {}).get("error", "")
            parts.append(f"the body is not valid JSON at character {at}: {reason}".rstrip(": "))
            continue
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install(app: FastAPI) -> None:
    @app.exception_handler(RagError)
    async def rag_error(request: Request, exc: RagError) -> JSONResponse:
        return error_response(request, exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        code = "invalid_json" if any(e.get("type") == "json_invalid" for e in errors) else "validation_error"
        return envelope(request, 422, code, _describe(errors), "client_error")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        kind = "client_error" if exc.status_code < 500 else "server_error"
        message = str(exc.detail)
        if exc.status_code == 400 and message == "There was an error parsing the body":
            # FastAPI's answer to a body it cannot decode (not UTF-8): the same 422 as bad JSON
            return envelope(request, 422, "invalid_json", "the body is not UTF-8 encoded JSON", kind)
        if exc.status_code == 400 and "multipart" in message.lower():
            # Starlette's answer to a form it cannot parse: a body that does not fit, like bad JSON
            message = f"{message} (expected multipart/form-data)"
            return envelope(request, 422, "invalid_multipart", message, kind)
        if exc.status_code in (404, 405) and message in ("Not Found", "Method Not Allowed"):
            message = f"{message}: no {request.method} {request.url.path} (the endpoints: /docs)"
        return envelope(request, exc.status_code, code, message, kind)

    @app.exception_handler(EngineError)
    async def engine_error(request: Request, exc: EngineError) -> JSONResponse:
        """A storage engine failed and no flow caught it: 507 (no space) or 503, nothing acked."""
        log.warning("request_id=%s: %s", request_id(request), exc)
        return error_response(request, service_error(exc) or BackendUnavailable(str(exc)))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error request_id=%s", request_id(request))
        return envelope(request, 500, "internal_error", "internal error", "server_error")
