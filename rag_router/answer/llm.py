"""OpenAI-compatible chat completions over httpx, for vLLM: streaming, deadlines, retries, breaker.

Always streams (one code path; the non-streaming call collects the stream). What vLLM and
openai-python get wrong, handled here:

- vLLM queues without bound and can hang while its health check answers: every call runs
  under the request's deadline (connect, read and the whole stream); a hang is a timeout.
- Retries like openai-python: 408/409/429/5xx and connection errors, exponential backoff with
  jitter, ``Retry-After`` honoured when it fits in the remaining budget; never once the first
  token has been received (the caller may already have shown it).
- vLLM reports some errors inside a 200 stream (``{"error": …}`` or ``{"object": "error"}``), and
  a stream may end without ``[DONE]``: both are failures. ``finish_reason == "length"`` is a
  truncation. None of them is ever returned as a complete answer.
- A circuit breaker fails fast after repeated failures, so a dead server costs microseconds.
- TTFT, time per output token and token counts go to Prometheus.

Errors::

    LLMError                 the answer could not be produced
    ├── LLMUnavailable       connection refused, 5xx/429 after retries, breaker open
    ├── LLMTimeout           the deadline passed (including a hung stream)
    ├── LLMTruncated         finish_reason "length"
    └── LLMBadResponse       in-band error, missing [DONE], malformed event
        └── LLMContextExceeded   the prompt is longer than the server's context window

A prompt over the window is a 400 in two dialects: OpenAI's and vLLM's ``context_length_exceeded``
(the window only in the message) and llama.cpp's ``exceed_context_size_error`` (with
``n_prompt_tokens`` and ``n_ctx``). Both become ``LLMContextExceeded`` carrying the window when the
server said it, so the caller can fit the sources to it and ask again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class LLMError(Exception):
    """The model could not produce an answer."""


class LLMUnavailable(LLMError):
    pass


class LLMTimeout(LLMError):
    pass


class LLMTruncated(LLMError):
    """The model answered, at length: ``spent`` holds what it wrote and the tokens it took."""

    def __init__(self, message: str, partial: str, spent: Completion | None = None) -> None:
        super().__init__(message)
        self.partial = partial
        self.spent = spent


class LLMBadResponse(LLMError):
    pass


class LLMContextExceeded(LLMBadResponse):
    def __init__(self, message: str, n_ctx: int | None, n_prompt: int | None) -> None:
        super().__init__(message)
        self.n_ctx = n_ctx
        self.n_prompt = n_prompt


_WINDOW = re.compile(r"maximum context length is (\d+)")


def context_exceeded(status: int, text: str) -> LLMContextExceeded | None:
    """The error a server gives for a prompt over its window, in either dialect; else None."""
    if status != 400:
        return None
    try:
        error = json.loads(text).get("error")
    except (json.JSONDecodeError, AttributeError):
        return None
    if not isinstance(error, dict):
        return None
    message = str(error.get("message") or "")
    if error.get("type") == "exceed_context_size_error":
        n_ctx, n_prompt = error.get("n_ctx"), error.get("n_prompt_tokens")
    elif error.get("code") == "context_length_exceeded" or _WINDOW.search(message):
        found = _WINDOW.search(message)
        n_ctx, n_prompt = (int(found.group(1)) if found else None), None
    else:
        return None
    return LLMContextExceeded(
        f"the prompt is over the LLM's context window: {message[:200]}",
        n_ctx if isinstance(n_ctx, int) else None,
        n_prompt if isinstance(n_prompt, int) else None,
    )


class LLMMetrics(Protocol):
    def observe_llm(
        self, *, ttft_s: float | None, tpot_s: float | None, prompt: int, completion: int
    ) -> None: ...


@dataclass(slots=True)
class Completion:
    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ttft_s: float | None = None
    seconds: float = 0.0
    chunks: int = field(default=0, repr=False)

    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


class CircuitBreaker:
    """Open after ``threshold`` consecutive failures; one trial call after ``cooldown_s``."""

    def __init__(
        self, threshold: int = 5, cooldown_s: float = 30.0, clock: Callable[[], float] = time.monotonic
    ):
        self._threshold = threshold
        self._cooldown = cooldown_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None

    @property
    def open(self) -> bool:
        if self._opened_at is None:
            return False
        if self._clock() - self._opened_at >= self._cooldown:
            self._opened_at = None  # half-open: let one call through
            self._failures = self._threshold - 1
            return False
        return True

    def success(self) -> None:
        self._failures, self._opened_at = 0, None

    def failure(self) -> None:
        self._failures += 1
        if self._failures >= self._threshold:
            self._opened_at = self._clock()


def retry_after_s(response: httpx.Response) -> float | None:
    """``Retry-After`` (seconds or HTTP date) or vLLM/OpenAI's ``retry-after-ms``."""
    ms = response.headers.get("retry-after-ms")
    if ms:
        with contextlib.suppress(ValueError):
            return float(ms) / 1000
    value = response.headers.get("retry-after")
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return float(value)
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    return None


def backoff_s(attempt: int, initial: float = 0.5, maximum: float = 8.0) -> float:
    """openai-python's schedule: exponential, capped, with up to 25 % jitter off."""
    return min(initial * 2.0**attempt, maximum) * (1 - 0.25 * random.random())


class LLMClient:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
        breaker: CircuitBreaker | None = None,
        metrics: LLMMetrics | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, transport=transport)
        self.model = model
        self._max_retries = max_retries
        self._breaker = breaker or CircuitBreaker()
        self._metrics = metrics

    async def close(self) -> None:
        await self._http.aclose()

    async def complete(self, messages: list[dict[str, str]], *, deadline: float, **params: Any) -> Completion:
        """The whole answer (collected from the stream); raises LLMError otherwise."""
        result = Completion()
        async for _ in self.stream(messages, deadline=deadline, result=result, **params):
            pass
        return result

    async def stream(
        self,
        messages: list[dict[str, str]],
        *,
        deadline: float,
        result: Completion | None = None,
        max_tokens: int = 512,
        response_format: dict[str, Any] | None = None,
        temperature: float = 0.0,
    ) -> AsyncIterator[str]:
        """Text deltas as they arrive. ``deadline`` is ``time.monotonic()``-based.

        On return ``result`` holds the finished completion. Raises an ``LLMError`` for every way
        the answer can fail, including after some deltas were yielded.
        """
        result = result if result is not None else Completion()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if response_format is not None:
            body["response_format"] = response_format
        if self._breaker.open:
            raise LLMUnavailable("LLM circuit breaker is open after repeated failures")
        started = time.monotonic()
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel (a client gone)
            async with asyncio.timeout(_left(deadline)):
                response = await self._connect(body, deadline)
            async for delta in self._events(response, result, started, deadline):
                yield delta
        except TimeoutError as exc:
            self._breaker.failure()
            raise LLMTimeout("the LLM did not finish within the deadline") from exc
        except LLMContextExceeded:
            raise  # our prompt was too long: the server is healthy
        except LLMTruncated:
            self._breaker.success()  # it answered, at length: no reason to stop asking it
            self._observe(result, started)  # its first token and its tokens were real
            raise
        except LLMError:
            self._breaker.failure()
            raise
        self._breaker.success()
        self._observe(result, started)

    def _observe(self, result: Completion, started: float) -> None:
        result.seconds = time.monotonic() - started
        if self._metrics is not None:
            tpot = (
                (result.seconds - result.ttft_s) / max(1, result.completion_tokens - 1)
                if result.ttft_s is not None and result.completion_tokens > 1
                else None
            )
            self._metrics.observe_llm(
                ttft_s=result.ttft_s,
                tpot_s=tpot,
                prompt=result.prompt_tokens,
                completion=result.completion_tokens,
            )

    async def _connect(self, body: dict[str, Any], deadline: float) -> httpx.Response:
        """POST with retries until a 200 stream starts (no token has been read yet)."""
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            timeout = httpx.Timeout(remaining, connect=min(remaining, 5.0))
            request = self._http.build_request("POST", "/chat/completions", json=body, timeout=timeout)
            wait: float | None
            try:
                response = await self._http.send(request, stream=True)
            except httpx.TimeoutException as exc:
                raise TimeoutError from exc
            except httpx.TransportError as exc:
                reason, wait = f"cannot reach the LLM: {type(exc).__name__}", backoff_s(attempt)
            else:
                if response.status_code == 200:
                    return response
                await response.aread()
                await response.aclose()
                exceeded = context_exceeded(response.status_code, response.text)
                if exceeded is not None:
                    raise exceeded
                if response.status_code not in RETRY_STATUSES:
                    raise LLMBadResponse(f"LLM answered {response.status_code}: {response.text[:300]}")
                reason = f"LLM answered {response.status_code}"
                wait = retry_after_s(response)
                wait = backoff_s(attempt) if wait is None else wait
            if attempt >= self._max_retries or time.monotonic() + wait >= deadline:
                raise LLMUnavailable(f"{reason} (after {attempt + 1} attempts)")
            log.info("%s; retrying in %.2f s", reason, wait)
            attempt += 1
            await asyncio.sleep(wait)

    async def _events(
        self, response: httpx.Response, result: Completion, started: float, deadline: float
    ) -> AsyncIterator[str]:
        """Deltas from the SSE lines; each wait for the server is bounded by the deadline
        (the time the caller spends between deltas is not the server's)."""
        done = False
        lines = response.aiter_lines()
        try:
            while True:
                try:
                    async with asyncio.timeout(_left(deadline)):
                        line = await anext(lines)
                except StopAsyncIteration:
                    break
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                delta = _apply(_event(data), result)
                if delta:
                    if result.ttft_s is None:
                        result.ttft_s = time.monotonic() - started
                    result.text += delta
                    yield delta
        except httpx.TimeoutException as exc:
            raise TimeoutError from exc
        except httpx.TransportError as exc:
            raise LLMBadResponse(f"the LLM stream broke: {type(exc).__name__}") from exc
        finally:
            await response.aclose()
        if not done:
            raise LLMBadResponse("the LLM stream ended without [DONE]")
        if result.finish_reason == "length":
            raise LLMTruncated("the answer was cut at max_tokens (finish_reason=length)", result.text, result)
        if result.finish_reason is None:
            raise LLMBadResponse("the LLM stream never gave a finish_reason")


def _event(data: str) -> dict[str, Any]:
    try:
        event = json.loads(data)
    except json.JSONDecodeError as exc:
        raise LLMBadResponse(f"malformed stream event: {data[:200]}") from exc
    if not isinstance(event, dict):
        raise LLMBadResponse("stream event is not an object")
    if "error" in event or event.get("object") == "error":
        error = event.get("error", event)
        message = error.get("message") if isinstance(error, dict) else str(error)
        raise LLMBadResponse(f"the LLM reported an error in the stream: {message}")
    return event


def _apply(event: dict[str, Any], result: Completion) -> str:
    usage = event.get("usage")
    if isinstance(usage, dict):
        result.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        result.completion_tokens = int(usage.get("completion_tokens") or 0)
    delta = ""
    for choice in event.get("choices") or []:
        content = (choice.get("delta") or {}).get("content")
        if content:
            delta += content
        if choice.get("finish_reason"):
            result.finish_reason = choice["finish_reason"]
    if delta:
        result.chunks += 1
    return delta


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left
