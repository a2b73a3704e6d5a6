"""Failpoints: engines made down, slow or hung inside a running server, for the fault matrix.

Off unless ``RAG_FAULTS_FILE`` names a JSON file; then every call into a wrapped engine reads
the file (when it changed) and applies what it says for that engine::

    {"hot": {"mode": "down"}, "embedder": {"mode": "slow", "seconds": 3}, "cold": {"mode": "hang"}}

* ``down``: the call fails at once as the engine's own unreachable error would
  (``TierUnavailable`` for a tier, ``EmbedderUnavailable`` for the embedder lane);
* ``slow``: the call waits ``seconds`` first, then runs;
* ``hang``: the call never returns (until cancelled, as a request's deadline does).

Engines: ``hot`` and ``cold`` (every async method of the tier but ``close``) and ``embedder``
(both lanes). The LLM's faults are its wire's (tests/fakes/vllm.py speaks the protocol), so its
client's own deadlines and retries are what is tested. Like the failpoints of TiKV or
FoundationDB, this stays in the product so that the server under test is the one that ships.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from indexers.embed.embedder import AsyncEmbedder
from indexers.tiers.base import Tier, TierUnavailable

log = logging.getLogger(__name__)


class EmbedderUnavailable(RuntimeError):
    """The embedding model cannot run (a failpoint's ``down``)."""


class Failpoints:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._seen: tuple[float, int] | None = None
        self._plan: dict[str, dict[str, Any]] = {}

    def plan(self, engine: str) -> dict[str, Any]:
        try:
            stat = self._path.stat()
            seen = (stat.st_mtime_ns, stat.st_size)
            if seen != self._seen:
                self._plan, self._seen = json.loads(self._path.read_text(encoding="utf-8") or "{}"), seen
                log.warning("failpoints now: %s", self._plan)
        except FileNotFoundError:
            self._plan, self._seen = {}, None
        except (OSError, ValueError):  # a half-written file: keep the plan before it
            pass
        return self._plan.get(engine) or {}

    async def hit(self, engine: str, down: Callable[[str], Exception]) -> None:
        plan = self.plan(engine)
        mode = plan.get("mode")
        if mode == "down":
            raise down(f"{engine} is down (failpoint)")
        if mode == "slow":
            await asyncio.sleep(float(plan.get("seconds", 1.0)))
        elif mode == "hang":
            await asyncio.Event().wait()


class FaultyTier:
    """``tier`` with its engine's failpoint in front of every async call."""

    def __init__(self, tier: Tier, name: str, points: Failpoints) -> None:
        self._tier, self._name, self._points = tier, name, points

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._tier, attr)
        if attr == "close" or not inspect.iscoroutinefunction(value):
            return value

        async def call(*args: Any, **kwargs: Any) -> Any:
            await self._points.hit(self._name, TierUnavailable)
            return await value(*args, **kwargs)

        return call


class FaultyEmbedder(AsyncEmbedder):
    """The embedder's two lanes with the ``embedder`` failpoint in front."""

    def __init__(self, inner: AsyncEmbedder, points: Failpoints) -> None:  # no super(): a view
        self._inner, self._points = inner, points
        self.sync = inner.sync
        self.batcher = inner.batcher

    async def embed_query(self, text: str) -> np.ndarray:
        await self._points.hit("embedder", EmbedderUnavailable)
        return await self._inner.embed_query(text)

    async def embed_bulk(self, texts: Sequence[str]) -> np.ndarray:
        await self._points.hit("embedder", EmbedderUnavailable)
        return await self._inner.embed_bulk(texts)

    def close(self) -> None:
        self._inner.close()
