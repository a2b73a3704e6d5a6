"""A Ray-engine ingest of CORPUS into DATA's cold tier that prints each document it acknowledges.

Run by tests/crash/test_ray_kill.py, which SIGKILLs a Ray worker and this driver mid-run.
Small units and frequent commits, so that documents are acknowledged all along the run.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Sequence
from pathlib import Path

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.ingest.ray.pipeline import RayOptions, RayPipeline
from indexers.ingest.results import DocResult, IngestReport
from indexers.text.chunk import Chunker
from indexers.text.lexical import Analyzer
from indexers.tiers.local_cold import LocalColdTier

MAX_TOKENS, OVERLAP = 60, 8


async def main(data: Path, corpus: Path) -> None:
    embedder = SentenceTransformerEmbedder(device="cpu")
    tier = LocalColdTier(data / "cold", dim=embedder.dim, analyzer=Analyzer())
    await tier.ensure()

    def acknowledged(results: Sequence[DocResult], _: IngestReport) -> None:
        for r in results:
            print(f"ack {r.id}", flush=True)

    pipeline = RayPipeline(
        embedder=embedder,
        make_embedder=functools.partial(SentenceTransformerEmbedder, device="cpu"),
        chunker=Chunker(embedder.count_tokens, max_tokens=MAX_TOKENS, overlap_tokens=OVERLAP),
        analyzer=Analyzer(),
        tiers={"cold": tier},
        options=RayOptions(num_cpus=2, unit_mb=0.002, embed_units=1, commit_chunks=4),
    )
    report = await pipeline.ingest([corpus], placement="cold", on_batch=acknowledged)
    await tier.close()
    print(f"done {report.documents}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
