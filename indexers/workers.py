"""Worker threads for blocking engines, behind a bounded queue.

The event loop never runs engine code: each call goes to a small thread pool, and a
semaphore bounds how many calls may wait for it, so overload queues here, visibly,
instead of growing without bound inside the executor.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Worker:
    def __init__(self, name: str, threads: int = 2, queue: int = 256) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._slots = asyncio.Semaphore(threads + queue)

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        async with self._slots:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
