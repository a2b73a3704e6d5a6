"""What a change of ``RAG_ELASTIC__LEXICAL_SHARDS`` costs a store: the re-index from SQLite.

A start with another shard count opens that layout empty and the catch-up fills it from SQLite
(``indexers/tiers/cold_shards.py``), inside the tier's opening. This fills an embedded cold tier
with ``--chunks`` chunks of the pool's recombined sentences (random 8-dimensional vectors: the
vectors play no part in it), closes it, then times its opening with ``--shards`` shards and again
with one index, with the process's peak RSS after each. Run it a second time on the same folder
for RSS figures of the openings alone (the filled store is kept: no fill then).

    python bench/lexical_relayout.py --pool pool.json.gz --chunks 1000000 --shards 4 --work /tmp/relayout
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine
from indexers.records import Chunk, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers.local_cold import LocalCold

BATCH = 5_000
DIM = 8


def _peak_mb() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def fill(cold: LocalCold, pool: Path, chunks: int) -> float:
    with gzip.open(pool, "rt", encoding="utf-8") as f:
        sentences = json.load(f)["sentences"]
    rng = np.random.default_rng(1)
    began = time.perf_counter()
    for start in range(0, chunks, BATCH):
        n = min(BATCH, chunks - start)
        picks, sizes = rng.integers(0, len(sentences), size=(n, 6)), rng.integers(2, 7, size=n)
        vectors = rng.standard_normal((n, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        items = [
            EmbeddedChunk(
                Chunk(
                    f"x{start + i}#0",
                    f"x{start + i}",
                    0,
                    " ".join(sentences[j] for j in picks[i, : sizes[i]]),
                    None,
                    {},
                ),
                vectors[i],
            )
            for i in range(n)
        ]
        cold.upsert(items)
    return round(time.perf_counter() - began, 1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pool", type=Path, required=True, help="bench/scale_corpus.py pool's output")
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--work", type=Path, required=True, help="an empty folder")
    args = parser.parse_args()
    analyzer = Analyzer()
    out: dict[str, object] = {"machine": machine(), "chunks": args.chunks}
    if not (args.work / "cold" / "cold.sqlite").exists():  # else filled by a run before
        cold = LocalCold(args.work / "cold", dim=DIM, analyzer=analyzer, ivf_threshold=10**9)
        out["fill_s"] = fill(cold, args.pool, args.chunks)
        cold.close()
    for shards in (args.shards, 1):
        began = time.perf_counter()
        cold = LocalCold(
            args.work / "cold", dim=DIM, analyzer=analyzer, ivf_threshold=10**9, lexical_shards=shards
        )
        cold.ensure()  # opening: the re-index from SQLite into the other layout
        seconds = time.perf_counter() - began
        out[f"open_into_{shards}_shards"] = {
            "seconds": round(seconds, 1),
            "chunks_per_s": round(args.chunks / seconds),
            "peak_rss_mb": _peak_mb(),
        }
        cold.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
