"""A scripted OpenAI-compatible (vLLM-like) server on loopback, for fault injection.

Each request pops the next ``Step`` from the script (the last one repeats). Steps speak the real
wire protocol over a real socket: SSE chunks as vLLM sends them, status codes with
``Retry-After``, errors inside a 200 stream, truncation, a stream without ``[DONE]``, a hang, and
a connection reset mid-stream. Every request body is recorded for assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Step:
    tokens: list[str] = field(default_factory=list)
    delay_s: float = 0.0  # between tokens
    status: int = 200
    retry_after: str | None = None
    finish: str | None = "stop"
    done: bool = True  # send "data: [DONE]"
    inband_error_after: int | None = None  # tokens sent before an in-band error event
    hang_after: int | None = None  # tokens sent before the server stops answering
    reset_after: int | None = None  # tokens sent before the connection is dropped
    error: dict[str, Any] | None = None  # the error body of a non-200 status (default: vLLM's)


def words(text: str) -> list[str]:
    """Tokens as a model streams them: words with their leading space."""
    parts = text.split(" ")
    return [parts[0]] + [" " + p for p in parts[1:]]


class ScriptedLLM:
    def __init__(self) -> None:
        self.script: list[Step] = [Step(words("Nothing scripted [1]."))]
        self.requests: list[dict[str, Any]] = []
        self.cancelled = 0  # streams the client abandoned (the server saw the disconnect)
        self.app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])

    def play(self, *steps: Step) -> None:
        self.script = list(steps)
        self.requests.clear()
        self.cancelled = 0

    def _next(self) -> Step:
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        step = self._next()
        if step.status != 200:
            headers = {"Retry-After": step.retry_after} if step.retry_after else {}
            error = step.error or {
                "object": "error",
                "message": f"scripted {step.status}",
                "code": step.status,
            }
            return JSONResponse(error, status_code=step.status, headers=headers)
        return StreamingResponse(self._watched(step, body), media_type="text/event-stream")

    async def _watched(self, step: Step, body: dict[str, Any]) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._events(step, body):
                yield chunk
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def _events(self, step: Step, body: dict[str, Any]) -> AsyncIterator[bytes]:
        def event(data: dict[str, Any]) -> bytes:
            return f"data: {json.dumps(data)}\n\n".encode()

        base = {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
        for i, token in enumerate(step.tokens):
            if step.inband_error_after == i:
                yield event({"object": "error", "message": "scripted in-band error", "code": 500})
                yield b"data: [DONE]\n\n"
                return
            if step.hang_after == i:
                await asyncio.sleep(3600)
            if step.reset_after == i:
                raise ConnectionResetError("scripted reset")
            if step.delay_s:
                await asyncio.sleep(step.delay_s)
            yield event(
                {**base, "choices": [{"index": 0, "delta": {"content": token}, "finish_reason": None}]}
            )
        yield event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": step.finish}]})
        usage = {
            "prompt_tokens": 100,
            "completion_tokens": len(step.tokens),
            "total_tokens": 100 + len(step.tokens),
        }
        yield event({**base, "choices": [], "usage": usage})
        if step.done:
            yield b"data: [DONE]\n\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run an ASGI app with uvicorn in a thread on loopback; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
