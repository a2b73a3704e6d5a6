"""Per-request context as plain ASGI middleware: the request id, its response header, metrics.

Plain ASGI rather than ``@app.middleware("http")``: Starlette's ``BaseHTTPMiddleware`` runs
every request through an extra task and memory streams, which costs more than a whole no-op
request here, and it would sit in front of the 429 and 413 fast paths too.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

Observe = Callable[[str, int, float], None]  # (route path, status, seconds)

_PROCESS = os.urandom(4).hex()  # ids are unique across processes and restarts...
_SEQUENCE = itertools.count()  # ...and cheap: uuid4() reads the OS's random source every time


def new_request_id() -> str:
    return f"{_PROCESS}{next(_SEQUENCE):016x}"


class RequestContext:
    def __init__(self, app: ASGIApp, observe: Observe) -> None:
        self.app = app
        self._observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope.get("headers") or () if k == b"x-request-id"), None)
        request_id = given.decode("latin-1") if given else new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message).append("x-request-id", request_id)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            route = scope.get("route")
            self._observe(getattr(route, "path", "unmatched"), status, time.perf_counter() - started)
