"""The embedded cold tier's bulk adoption as the table grows: rows a second, per step.

    python bench/cold_adopt.py --rows 1000000 --group 8 --out bench/results/bench-cold-adopt.json
    python bench/cold_adopt.py --rows 500000 --page-size 16384   # the page size before 64 KB
    python bench/cold_adopt.py --rows 500000 --writer-checkpoints  # the WAL copied as before

Builds segments of random-id chunks (random ids are what real corpora have: UUIDs, hashes,
numbers in no order; they are what makes index maintenance grow with the table), each with a
vector and ~160 words of text, then adopts them into a fresh ``LocalCold`` in bulk mode the way
the Ray engine's owner does: ``--group`` segments a transaction, tantivy fed beside it and
committed every ``--commit-rows``, the WAL checkpointed in a thread of its own (or, with
``--writer-checkpoints``, by the writer inside its commits, as SQLite does by itself). Reports
the rate of each step of ``--step`` rows, and the tier's busy seconds (adopt: SQLite; lexical:
the tantivy feed; checkpoint: the thread). FAISS's build at the end is not part of it
(bulk_ingest.py times it).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import emit, machine
from indexers.records import Chunk, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers import cold_bulk, cold_segment, cold_store
from indexers.tiers.cold_segment import write_segment
from indexers.tiers.local_cold import LocalCold


def segments(folder: Path, rows: int, per: int, analyzer: Analyzer) -> list[Path]:
    rnd = random.Random(0)
    gen = np.random.default_rng(0)
    words = [f"w{i}" for i in range(20_000)]
    out: list[Path] = []
    for s in range(0, rows, per):
        items = []
        for _ in range(min(per, rows - s)):
            doc = f"{rnd.getrandbits(48):012x}"
            text = " ".join(rnd.choices(words, k=160))
            vector = gen.standard_normal(384, dtype=np.float32)
            chunk = Chunk(f"{doc}#0", doc, 0, text, "T", {})
            items.append(EmbeddedChunk(chunk, vector / np.linalg.norm(vector)))
        out.append(folder / f"{len(out)}.segment")
        write_segment(out[-1], items, analyzer)
    return out


class _WriterCheckpoints:
    """In place of ``Checkpointer``: the writer keeps checkpointing inside its commits."""

    seconds = writer_seconds = 0.0

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def committed(self) -> None:
        pass

    def writing(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--segment-rows", type=int, default=5_000)
    parser.add_argument("--group", type=int, default=8, help="segments a transaction (1..8)")
    parser.add_argument("--commit-rows", type=int, default=65_536)
    parser.add_argument("--step", type=int, default=200_000)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--page-size", type=int, default=cold_store.PAGE_SIZE, help="SQLite page size of new files"
    )
    parser.add_argument(
        "--wal-limit-mb", type=int, default=cold_bulk.BULK_WAL_LIMIT >> 20, help="the WAL's bound in bulk"
    )
    parser.add_argument(
        "--writer-checkpoints", action="store_true", help="no checkpoint thread: the writer's own"
    )
    args = parser.parse_args()
    if args.writer_checkpoints:
        cold_bulk.Checkpointer = _WriterCheckpoints  # type: ignore[assignment,misc]
    cold_bulk.BULK_WAL_LIMIT = args.wal_limit_mb << 20  # read when a bulk load begins
    cold_store.PAGE_SIZE = cold_segment.PAGE_SIZE = args.page_size  # read when each file is made
    analyzer = Analyzer()
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        built = segments(Path(tmp), args.rows, args.segment_rows, analyzer)
        cold = LocalCold(Path(tmp) / "cold", dim=384, analyzer=analyzer)
        cold.ensure()
        cold.bulk_begin(threads=2)
        steps: list[float] = []
        pending: list[Path] = []
        done = since_commit = 0
        began = mark = time.perf_counter()
        for i, path in enumerate(built):
            copy = path.with_suffix(".adopt")
            shutil.copy(path, copy)  # adopted segments are deleted by the owner; keep the source
            pending.append(copy)
            n = min(args.segment_rows, args.rows - i * args.segment_rows)
            done, since_commit = done + n, since_commit + n
            if len(pending) == args.group or i == len(built) - 1:
                cold.adopt(pending)
                pending = []
            if since_commit >= args.commit_rows:
                cold.bulk_commit()
                since_commit = 0
            if done % args.step == 0:
                now = time.perf_counter()
                steps.append(round(args.step / (now - mark)))
                mark = now
        cold.bulk_commit()
        cold._stop_checkpointer()  # the WAL's last pages copied (in a real load: beside FAISS)
        seconds = time.perf_counter() - began
        result = {
            "machine": machine(),
            "command": " ".join(["bench/cold_adopt.py", *sys.argv[1:]]),
            "rows": args.rows,
            "group": args.group,
            "page_size": args.page_size,
            "wal_limit_mb": args.wal_limit_mb,
            "seconds": round(seconds, 1),
            "rows_per_s": round(args.rows / seconds),
            "rows_per_s_by_step": steps,
            "busy_s": {k: round(v, 1) for k, v in cold.bulk_seconds.items()},
        }
        cold.close()
    emit(result, args.out)


if __name__ == "__main__":
    main()
