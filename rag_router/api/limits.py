"""Request-body bound, enforced before any route reads the body.

A declared ``Content-Length`` over the bound is refused at once; a body without one (chunked)
is read up to the bound and refused as soon as it passes it, so no route ever sees more.
"""

from __future__ import annotations

import json

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
        request_id = str(scope.get("state", {}).get("request_id", "-"))
        message = f"request body over {limit} bytes"
        payload = {
            "error": {
                "code": "payload_too_large",
                "message": message,
                "type": "client_error",
                "request_id": request_id,
            }
        }
        data = json.dumps(payload).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(data)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})
