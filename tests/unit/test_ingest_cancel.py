"""A cancel stops the batch being embedded: the run ends without waiting for the embedder."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np

from indexers.embed.embedder import AsyncEmbedder
from indexers.ingest.pipeline import Pipeline
from indexers.records import Document, Vector
from indexers.text.chunk import Chunker
from indexers.tiers.base import Tier


class StuckEmbedder:
    """Embeds nothing until released: a long batch on a busy CPU."""

    model_name = "stuck"
    dim = 384

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def embed(self, texts: Sequence[str]) -> Vector:
        self.entered.set()
        self.release.wait(120)  # a bound, so a failing test ends instead of hanging the run
        return np.zeros((len(texts), self.dim), dtype=np.float32)


async def test_a_cancel_stops_the_batch_being_embedded(tiers: dict[str, Tier]) -> None:
    stuck = StuckEmbedder()
    pipeline = Pipeline(
        embedder=AsyncEmbedder(stuck),
        chunker=Chunker(stuck.count_tokens, max_tokens=40, overlap_tokens=0),
        tiers=tiers,  # type: ignore[arg-type]
    )
    cancel = asyncio.Event()
    docs = [Document(f"d{i}", f"Sentence {i} about harbour fees.") for i in range(20)]
    run = asyncio.create_task(pipeline.ingest(docs, cancel=cancel))
    try:
        assert await asyncio.to_thread(stuck.entered.wait, 60)
        cancel.set()
        async with asyncio.timeout(30):  # before the fix: the run waits for the embedder (120 s)
            report = await run
    finally:
        stuck.release.set()
    assert report.cancelled and report.documents == 0
    assert [await t.count() for t in tiers.values()] == [0, 0]
