"""Request-body bound, enforced before any route reads the body.

A declared ``Content-Length`` over the bound is refused at once; a body without one (chunked)
is read up to the bound and refused as soon as it passes it, so no route ever sees more.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, per_path: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.per_path = per_path or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.per_path.get(scope.get("path", ""), self.max_bytes)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) > limit:
                await self._reject(scope, send, limit)
                return
            await self.app(scope, receive, send)
            return
        body: list[Message] = []
        size = 0
        while True:
            message = await receive()
            body.append(message)
            size += len(message.get("body", b""))
            if size > limit:
                await self._reject(scope, send, limit)
                return
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        replay = iter(body)

        async def buffered() -> Message:
            return next(replay, None) or await receive()

        await self.app(scope, buffered, send)

    async def _reject(self, scope: Scope, send: Send, limit: int) -> None:
        await _reply(send, 413, "payload_too_large", f"request body over {limit} bytes", scope, {})


ADMITTED_PATHS = frozenset({"/v1/search", "/v1/answer", "/v1/chat/completions"})


class InFlightLimit:
    """Admission control: at most ``limit`` search/answer requests in flight inside the app.

    Counted here, not by uvicorn's connection limit (which counts idle keep-alive connections).
    Over the bound a request gets 429 with ``Retry-After`` at once, before its body is read, so
    overload costs the rejected clients microseconds and the admitted ones nothing.
    """

    def __init__(self, app: ASGIApp, limit: int, on_reject: Callable[[], None] | None = None) -> None:
        self.app = app
        self.limit = limit
        self.inflight = 0
        self._on_reject = on_reject

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") not in ADMITTED_PATHS:
            await self.app(scope, receive, send)
            return
        if self.inflight >= self.limit:
            if self._on_reject is not None:
                self._on_reject()
            await _reply(
                send,
                429,
                "overloaded",
                f"over {self.limit} requests in flight; retry shortly",
                scope,
                {"retry-after": "1"},
            )
            return
        self.inflight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.inflight -= 1


async def _reply(
    send: Send, status: int, code: str, message: str, scope: Scope, headers: dict[str, str]
) -> None:
    request_id = str(scope.get("state", {}).get("request_id", "-"))
    kind = "client_error" if status < 500 else "server_error"
    data = json.dumps(
        {"error": {"code": code, "message": message, "type": kind, "request_id": request_id}}
    ).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})
