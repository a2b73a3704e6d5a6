"""Hot tier, embedded: Qdrant Edge (Qdrant's own engine, in-process).

Qdrant Edge runs no background optimizer, holds the GIL for the whole of every call (an
``optimize()`` of 20k points took 65 s here) and lets one process open a shard. So the tier
is a small LSM of shards, listed in ``manifest.json``:

- one **fresh** shard takes every write. It is never optimized: it stays small and is
  searched exactly (plain segments; ~1.6 ms at 20k points here).
- **sealed** shards are built and optimized (HNSW, payload indexes) **in a child process**
  from an export of the shards they replace, then opened and swapped in. While a build runs,
  its inputs stay searchable and keep taking deletes; the deletes are replayed on the new
  shard before the swap, under the write lock.

Every chunk id lives in exactly one shard: an upsert writes to fresh and deletes the id from
the others. Searches query every shard with the same per-leg requests and merge by score.
Dense scores (cosine) are comparable across shards; lexical scores use each shard's own IDF,
an approximation that vanishes once the fresh shard is sealed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from indexers.records import EmbeddedChunk, Vector
from indexers.text.lexical import Analyzer
from indexers.tiers import edge_shard as es
from indexers.tiers import qdrant_points as qp
from indexers.tiers.base import TierError
from indexers.tiers.disk import DiskGuard
from indexers.tiers.edge_shards import EdgeShards
from indexers.tiers.threaded import ThreadedTier

log = logging.getLogger(__name__)

Compaction = Literal["subprocess", "inprocess"]


class QdrantEdgeTier(ThreadedTier):
    """The embedded hot tier: ``EdgeShards`` in worker threads, sealed shards built in the background."""

    def __init__(
        self,
        path: Path,
        *,
        dim: int,
        analyzer: Analyzer,
        avg_len: float = 100.0,
        indexing_threshold_kb: int | None = None,
        hnsw_ef: int = qp.HNSW_EF,
        fresh_limit: int = 20_000,
        max_sealed: int = 4,
        compaction: Compaction = "subprocess",
        nice: int = 0,
        guard: DiskGuard | None = None,
    ) -> None:
        self._guard = guard  # no shard build under its floor (the build maps tens of MB)
        config = es.ShardConfig(dim=dim, indexing_threshold_kb=indexing_threshold_kb)
        self.shards = EdgeShards(
            path, config=config, analyzer=analyzer, avg_len=avg_len, hnsw_ef=hnsw_ef, max_sealed=max_sealed
        )
        super().__init__(self.shards, name="qdrant-edge", nice=nice)
        self._fresh_limit = fresh_limit
        self._compaction = compaction
        self._compacting = asyncio.Lock()
        self._background: asyncio.Task[bool] | None = None

    async def upsert(self, chunks: Sequence[EmbeddedChunk]) -> None:
        if not chunks:
            return
        await super().upsert(chunks)
        await self._seal_when_full()

    async def vectors(self, tenant: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        return await self.read(self.shards.vectors, tenant, list(chunk_ids)) if chunk_ids else {}

    async def upsert_parts(self, parts: Sequence[es.PointParts]) -> None:
        """Upsert points whose parts were built elsewhere (``es.point_parts``, same analyzer and avg_len)."""
        if not parts:
            return
        await self.run(self.shards.upsert_points, [es.from_parts(p) for p in parts])
        await self._seal_when_full()

    async def _seal_when_full(self) -> None:
        full = await self.run(self.shards.fresh_size) >= self._fresh_limit
        if full and self._guard is not None and self._guard.low():
            log.warning("hot tier: fresh shard full, sealing postponed: the disk is under its floor")
            return
        if full and (self._background is None or self._background.done()):  # after the await
            self._background = asyncio.create_task(self.compact(merge=False))

    async def optimize(self) -> bool:
        """Seal the fresh shard and merge every sealed shard into one optimized shard."""
        return await self.compact(merge=True)

    async def compact(self, *, merge: bool) -> bool:
        """Replace the fresh shard (and, when merging, every sealed one) by one optimized shard."""
        async with self._compacting:
            inputs = await self.run(self.shards.rotate, merge)
            if not inputs:
                return False
            name = self.shards.new_name("sealed")
            log.info("hot tier: sealing %d shard(s) into %s (%s)", len(inputs), name, self._compaction)
            export_dir = self.shards.dir / f"{name}.export"
            try:
                exported = await self.run(es.export, [s for _, s in inputs], export_dir)
                await self._build(export_dir, self.shards.dir / name)
                built = await self.run(es.open_shard, self.shards.dir / name, self.shards.config)
                await self.run(self.shards.swap, inputs, (name, built), exported)
            finally:
                shutil.rmtree(export_dir, ignore_errors=True)
            log.info("hot tier: sealed %d points from %d shard(s) into %s", len(exported), len(inputs), name)
            return True

    async def _build(self, source: Path, dest: Path) -> None:
        if self._compaction == "inprocess":
            await self.run(es.build, source, dest, self.shards.config)
            return
        proc = await asyncio.create_subprocess_exec(
            *es.build_command(source, dest, self.shards.config),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        if proc.returncode != 0:
            shutil.rmtree(dest, ignore_errors=True)
            raise TierError(f"sealed-shard build failed ({proc.returncode}): {err.decode()[-2000:]}")

    def shard_names(self) -> list[str]:
        """Fresh first, then sealed (for tests and /readyz details)."""
        return self.shards.shard_names()

    async def close(self) -> None:
        if self._background is not None:
            with contextlib.suppress(Exception):
                await self._background
        async with self._compacting:
            await super().close()
