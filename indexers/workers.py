"""Worker threads for blocking engines, behind a bounded queue.

The event loop never runs engine code: each call goes to a small thread pool, and a
semaphore bounds how many calls may wait for it, so overload queues here, visibly,
instead of growing without bound inside the executor.

Worker and model threads may run at a lower OS priority than the event loop (``nice``): on
a saturated machine the loop, which accepts connections and refuses excess requests with
429, is then scheduled first whenever it wakes (measured in docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


def lower_priority(nice: int) -> None:
    """Raise the calling thread's nice value by ``nice`` (Linux, where it is per thread).

    Elsewhere, or where the OS refuses, the thread keeps its priority: this only orders
    threads of one process, it never decides correctness.
    """
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)


class Worker:
    def __init__(self, name: str, threads: int = 2, queue: int = 256, *, nice: int = 0) -> None:
        self._pool = ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix=name, initializer=lower_priority, initargs=(nice,)
        )
        self._slots = asyncio.Semaphore(threads + queue)

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        async with self._slots:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
