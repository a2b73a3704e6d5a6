"""Query embeddings, micro-batched across concurrent requests, with an LRU cache in front.

On CPU the embedder is the bottleneck and a batch of short queries costs far less than the
same queries one by one, so concurrent requests share forward passes. The batcher owns one
thread per model it is given (``runs``; e.g. two single-threaded ONNX sessions): a request
puts its text on a pending list and awaits a future; a free thread takes up to ``max_batch``
pending queries, runs one forward pass and hands the vectors back to the event loop in a
single callback. A thread that finds every other one idle runs its batch on ``solo`` instead,
when given (e.g. one session with every core): a lone query gets the whole machine, while
under load each thread runs its own batch on its own core. "Lone" means no query arrived
during the last pass: under load every thread is sometimes idle for a moment (its requests
are in the tiers), and an all-core pass then competes with the rest of the service for the
same cores (measured: 10 % less throughput at 64 clients). While a pass runs, new requests pile up
and go in the next one, so under load batches fill by themselves and the model never waits
for the event loop between passes (measured: with the loop driving each pass the model sat
idle ~18 % of the time at 64 clients). An idle model may wait ``max_wait_s`` for company
(0 by default: a lone query should not pay for batching). A request that is cancelled (client
gone, deadline) drops out before its pass; an error reaches every request of its batch.

The cache is keyed by the NFKC-normalised, whitespace-collapsed text (the model is the
batcher's own, so the model name is implied); vectors are returned read-only. Cache and
futures are touched only on the event loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import unicodedata
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from indexers.records import Vector
from indexers.workers import lower_priority

Run = Callable[[Sequence[str]], Vector]  # blocking: runs in the batcher's thread
Observe = Callable[[int, Sequence[float]], None]  # (batch size, each request's wait in seconds)


def normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


@dataclass(slots=True)
class _Pending:
    key: str
    future: asyncio.Future[Vector]
    loop: asyncio.AbstractEventLoop
    since: float = field(default_factory=time.perf_counter)

    @property
    def size(self) -> int:
        return len(self.key)  # characters: a free stand-in for tokens when grouping by length


class QueryBatcher:
    def __init__(
        self,
        runs: Sequence[Run],
        *,
        solo: Run | None = None,
        max_batch: int = 32,
        max_wait_s: float = 0.0,
        cache_size: int = 10_000,
        observe: Observe | None = None,
        name: str = "embed-query",
        nice: int = 0,
    ) -> None:
        if not runs:
            raise ValueError("a query batcher needs at least one model")
        self._runs = list(runs)
        self._solo = solo
        self._busy = 0  # threads in a forward pass
        self._contended = False  # a query arrived while a pass ran, since the last pass began
        self._max_batch = max_batch
        self._max_wait = max_wait_s
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._cache_size = cache_size
        self._observe = observe
        self._name = name
        self._nice = nice  # the threads' priority below the event loop's (workers.lower_priority)
        self._pending: deque[_Pending] = deque()
        self._wake = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.hits = 0

    async def embed(self, text: str) -> Vector:
        key = normalise(text)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            self.hits += 1
            return cached
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Vector] = loop.create_future()
        with self._wake:
            if self._closed:
                raise RuntimeError("query batcher is closed")
            self._pending.append(_Pending(key, future, loop))
            if self._busy:
                self._contended = True
            if not self._threads:
                self._threads = [
                    threading.Thread(target=self._serve, args=(run,), name=f"{self._name}-{i}", daemon=True)
                    for i, run in enumerate(self._runs)
                ]
                for thread in self._threads:
                    thread.start()
            self._wake.notify()
        return await future

    def close(self) -> None:
        """Stop the threads after the passes already queued (their requests still get answers)."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
            threads = list(self._threads)
        for thread in threads:
            thread.join()

    # the models' threads -------------------------------------------------------------

    def _next_batch(self) -> tuple[list[_Pending], bool] | None:
        """The next batch, and whether it is lone (may run on ``solo``); None once closed and drained."""
        with self._wake:
            while not self._pending and not self._closed:
                self._wake.wait()
            if not self._pending:
                return None  # closed and drained
            if self._max_wait > 0 and len(self._pending) < self._max_batch:
                deadline = time.perf_counter() + self._max_wait  # idle model: wait a moment for company
                while len(self._pending) < self._max_batch and not self._closed:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        break
                    self._wake.wait(left)
            alone = self._busy == 0 and not self._contended
            self._contended = False
            self._busy += 1
            return self._take(), alone

    def _take(self) -> list[_Pending]:
        """The oldest pending query and the ones closest to it in length (less padding).

        Every forward pass is padded to its longest query (the ONNX lane also sorts each batch
        and runs it in short passes). The oldest query always goes first, so an odd-length
        query waits at most until it is the oldest.
        """
        if len(self._pending) <= self._max_batch:
            batch = list(self._pending)
            self._pending.clear()
            return batch
        oldest, *rest = self._pending
        rest.sort(key=lambda p: abs(p.size - oldest.size))
        batch, left = [oldest, *rest[: self._max_batch - 1]], rest[self._max_batch - 1 :]
        left.sort(key=lambda p: p.since)
        self._pending = deque(left)
        return batch

    def _serve(self, run: Run) -> None:
        lower_priority(self._nice)
        while (taken := self._next_batch()) is not None:
            batch, alone = taken
            self._pass(batch, self._solo if alone and self._solo is not None else run)

    def _pass(self, batch: list[_Pending], run: Run) -> None:
        live = [p for p in batch if not p.future.done()]  # a cancelled request is not embedded
        texts = list(dict.fromkeys(p.key for p in live))
        started = time.perf_counter()
        vectors: Vector | None = None
        error: BaseException | None = None
        try:
            if texts:
                vectors = run(texts)
        except Exception as exc:  # every request of the batch gets the error
            error = exc
        finally:
            with self._wake:  # idle before anyone hears back: their next query may find it so
                self._busy -= 1
        for loop in {p.loop for p in live}:
            mine = [p for p in live if p.loop is loop]
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(self._resolve, mine, texts, vectors, error, started)

    # back on the event loop -----------------------------------------------------------

    def _resolve(
        self,
        batch: list[_Pending],
        texts: list[str],
        vectors: Vector | None,
        error: BaseException | None,
        started: float,
    ) -> None:
        by_key: dict[str, Vector] = {}
        if vectors is not None:
            for text, vector in zip(texts, vectors, strict=True):
                vector.setflags(write=False)
                by_key[text] = vector
                self._remember(text, vector)
        for p in batch:
            if p.future.done():
                continue
            if error is not None:
                p.future.set_exception(error)
            else:
                p.future.set_result(by_key[p.key])
        if self._observe is not None:
            self._observe(len(texts), [started - p.since for p in batch])

    def _remember(self, key: str, vector: Vector) -> None:
        if self._cache_size <= 0:
            return
        self._cache[key] = vector
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
