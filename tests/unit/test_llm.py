"""The LLM client's rules that need no server: Retry-After, backoff, breaker, never-retry-after-a-token."""

from __future__ import annotations

import email.utils
import itertools
import time

import httpx
import pytest

from rag_router.answer.llm import (
    CircuitBreaker,
    LLMClient,
    LLMTimeout,
    LLMUnavailable,
    backoff_s,
    retry_after_s,
)


def response(**headers: str) -> httpx.Response:
    return httpx.Response(503, headers=headers)


def test_retry_after_in_seconds_dates_and_milliseconds() -> None:
    assert retry_after_s(response(**{"retry-after": "2"})) == 2.0
    assert retry_after_s(response(**{"retry-after-ms": "250"})) == 0.25
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < (retry_after_s(response(**{"retry-after": later})) or 0) <= 30
    assert retry_after_s(response()) is None and retry_after_s(response(**{"retry-after": "soon"})) is None


def test_backoff_grows_is_capped_and_jittered() -> None:
    assert 0.375 <= backoff_s(0) <= 0.5 and 0.75 <= backoff_s(1) <= 1.0
    assert all(6.0 <= backoff_s(10) <= 8.0 for _ in range(50))


def test_the_breaker_opens_after_repeated_failures_and_half_opens_later() -> None:
    now = [0.0]
    breaker = CircuitBreaker(threshold=3, cooldown_s=10, clock=lambda: now[0])
    for _ in range(3):
        assert not breaker.open
        breaker.failure()
    assert breaker.open
    now[0] = 11
    assert not breaker.open  # one trial call
    breaker.failure()
    assert breaker.open  # the trial failed: open again
    now[0] = 22
    assert not breaker.open
    breaker.success()
    breaker.failure()
    assert not breaker.open


async def test_an_open_breaker_fails_fast_without_a_request() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(503, headers={"retry-after": "0"})

    client = LLMClient(
        "http://llm/v1",
        "m",
        transport=httpx.MockTransport(handler),
        max_retries=0,
        breaker=CircuitBreaker(threshold=2, cooldown_s=60),
    )
    for _ in range(2):
        with pytest.raises(LLMUnavailable):
            await client.complete([{"role": "user", "content": "q"}], deadline=time.monotonic() + 5)
    with pytest.raises(LLMUnavailable, match="circuit breaker"):
        await client.complete([{"role": "user", "content": "q"}], deadline=time.monotonic() + 5)
    assert len(calls) == 2  # open: refused without a call
    await client.close()


async def test_retries_stop_at_the_budget_and_honour_retry_after() -> None:
    calls: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(time.monotonic())
        return httpx.Response(429, headers={"retry-after": "0.2"})

    client = LLMClient("http://llm/v1", "m", transport=httpx.MockTransport(handler), max_retries=5)
    started = time.monotonic()
    with pytest.raises(LLMUnavailable, match="429"):
        await client.complete([{"role": "user", "content": "q"}], deadline=started + 0.5)
    # Retry-After honoured (waits only get longer on a loaded machine), and no call past the budget
    assert len(calls) == 3 and all(b - a >= 0.19 for a, b in itertools.pairwise(calls))
    await client.close()


async def test_a_deadline_already_past_creates_no_coroutine_left_unawaited() -> None:
    """With warnings as errors, a coroutine made and dropped (the deadline checked second) failed
    a loaded CI run at teardown: 'coroutine LLMClient._connect was never awaited'."""
    import gc
    import warnings

    client = LLMClient("http://llm/v1", "m", transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(LLMTimeout):
            await client.complete([{"role": "user", "content": "q"}], deadline=time.monotonic() - 1)
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
    await client.close()
