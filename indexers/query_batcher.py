"""Query embeddings, micro-batched across concurrent requests, with an LRU cache in front.

On CPU the embedder is the bottleneck and a batch of 32 short queries costs little more than
one, so concurrent requests share forward passes: a request joins the pending list; when the
model is idle the batcher waits at most ``max_wait_s`` for company, then runs up to
``max_batch`` queries in one call (in the embedder's worker thread) and resolves each request's
future. While a pass runs, new requests pile up and go in the next one: under load batches
fill by themselves, with no added wait. A request that is cancelled (client gone, deadline)
simply drops out; if all of a batch is gone, the pass is skipped.

The cache is keyed by the NFKC-normalised, whitespace-collapsed text (the model is the
batcher's own, so the model name is implied); vectors are returned read-only.
"""

from __future__ import annotations

import asyncio
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from indexers.documents import Vector

Run = Callable[[Sequence[str]], Awaitable[Vector]]
Observe = Callable[[int, Sequence[float]], None]  # (batch size, each request's wait in seconds)


def normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


@dataclass(slots=True)
class _Pending:
    key: str
    future: asyncio.Future[Vector]
    since: float = field(default_factory=time.perf_counter)


class QueryBatcher:
    def __init__(
        self,
        run: Run,
        *,
        max_batch: int = 32,
        max_wait_s: float = 0.002,
        cache_size: int = 10_000,
        observe: Observe | None = None,
    ) -> None:
        self._run = run
        self._max_batch = max_batch
        self._max_wait = max_wait_s
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._cache_size = cache_size
        self._observe = observe
        self._pending: list[_Pending] = []
        self._task: asyncio.Task[None] | None = None
        self.hits = 0

    async def embed(self, text: str) -> Vector:
        key = normalise(text)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            self.hits += 1
            return cached
        future: asyncio.Future[Vector] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(key, future))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="query-batcher")
        return await future

    async def _drain(self) -> None:
        while self._pending:
            if len(self._pending) < self._max_batch and self._max_wait > 0:
                await asyncio.sleep(self._max_wait)  # idle model: wait a moment for company
            batch, self._pending = self._pending[: self._max_batch], self._pending[self._max_batch :]
            live = [p for p in batch if not p.future.done()]
            if not live:
                continue
            texts = list(dict.fromkeys(p.key for p in live))
            started = time.perf_counter()
            try:
                vectors = await self._run(texts)
            except Exception as exc:  # the embedder failed: every waiting request gets the error
                for p in live:
                    if not p.future.done():
                        p.future.set_exception(exc)
                continue
            by_key = {}
            for text, vector in zip(texts, vectors, strict=True):
                vector.setflags(write=False)
                by_key[text] = vector
                self._remember(text, vector)
            for p in live:
                if not p.future.done():
                    p.future.set_result(by_key[p.key])
            if self._observe is not None:
                self._observe(len(texts), [started - p.since for p in live])

    def _remember(self, key: str, vector: Vector) -> None:
        if self._cache_size <= 0:
            return
        self._cache[key] = vector
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
