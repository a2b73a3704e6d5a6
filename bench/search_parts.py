"""What one search costs in each part, measured alone: the floor under ``bench/load.py``.

    python bench/search_parts.py --data-dir /tmp/ev/scifact-onnx --out bench/results/bench-parts.json

On an already-ingested data dir (a hot tier on Qdrant Edge), with the server stopped (one
process may open an Edge shard), it measures, CPU time per search:

1. Qdrant Edge alone, one thread, the queries' real vectors and terms: a hybrid search
   (dense + lexical, ids only) at depths 100, 50 and 20, in the engine alone and with the
   results turned into ``LegHit``s; fetching the payloads of 10 hits, first touch and warm.
2. Whether the engine releases the interpreter lock: how fast a pure-Python counter runs in
   one thread while another runs hybrid searches, against beside an idle thread (two cores:
   ~1 × if the engine releases the lock during a search, about half or less if it holds it).
3. The whole ``Searcher.search`` in process, 64 concurrent, no HTTP: searches/s, CPU of the
   process and of the event loop's thread per search, and searches/s as a ratio to the raw
   embedder's best batched queries/s measured just before (``bench/load.py``'s measure).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import qdrant_edge as qe

from bench._common import emit, machine
from bench.load import load_queries, raw_embedder_apart
from indexers.tiers import edge_shard as es
from indexers.tiers.query import Filters, SearchQuery

Legs = list[tuple[str, qe.QueryRequest]]  # one search's requests, by leg


def cpu_ms(fn: Callable[[], object]) -> float:
    """CPU milliseconds of this thread for one call of ``fn``."""
    started = time.thread_time()
    fn()
    return (time.thread_time() - started) * 1000


def edge_parts(svc: Any, queries: list[str]) -> dict[str, Any]:
    """The hot tier's engine, called directly (a benchmark may look inside the tier)."""
    hot = svc.tiers["hot"]
    sample = queries[:256]
    n = len(sample)
    vectors = svc.embedder.embed(sample)
    shards = [shard for _, shard in hot._shards()]

    def searches(depth: int) -> list[SearchQuery]:
        return [
            SearchQuery(
                text=q,
                terms=svc.analyzer.query_terms(q),
                vector=v,
                filters=Filters("default"),
                k=depth,
                payload=False,
            )
            for q, v in zip(sample, vectors, strict=True)
        ]

    def engine(batch: list[Legs]) -> None:
        for legs in batch:
            for shard in shards:
                shard.query_batch(qe.QueryBatchRequest([r for _, r in legs]))

    def with_hits(batch: list[Legs]) -> None:
        for legs in batch:
            for shard in shards:
                es.search(shard, legs, payload=False)

    out: dict[str, Any] = {"points": sum(shard.count(qe.CountRequest(exact=True)) for shard in shards)}
    for depth in (100, 50, 20):
        batch = [es.leg_requests(q, hot._hnsw_ef) for q in searches(depth)]
        engine(batch)  # warm-up
        out[f"hybrid_depth_{depth}_ms"] = {
            "engine": round(cpu_ms(functools.partial(engine, batch)) / n, 3),
            "with_leg_hits": round(cpu_ms(functools.partial(with_hits, batch)) / n, 3),
        }
    top10 = [[h.ref for h in hot._search(q)["dense"][:10]] for q in searches(100)]

    def fetch() -> None:
        for refs in top10:
            hot._hydrate(refs)

    first, warm = cpu_ms(fetch), cpu_ms(fetch)
    out["fetch_10_ms"] = {"first_touch": round(first / n, 3), "warm": round(warm / n, 3)}

    batch = [es.leg_requests(q, hot._hnsw_ef) for q in searches(100)]

    def counter_rate(beside: Callable[[threading.Event], object] | None) -> float:
        """Increments/s of a pure-Python counter thread, alone or beside ``beside``."""
        stop = threading.Event()
        other = threading.Thread(target=beside, args=(stop,)) if beside else None
        if other:
            other.start()
        count, started = 0, time.perf_counter()
        while time.perf_counter() - started < 2.0:
            count += 1
        stop.set()
        if other:
            other.join()
        return count / (time.perf_counter() - started)

    def searching(stop: threading.Event) -> None:
        while not stop.is_set():
            engine(batch[:16])

    def sleeping(stop: threading.Event) -> None:
        stop.wait()

    alone, idle, busy = counter_rate(None), counter_rate(sleeping), counter_rate(searching)
    out["interpreter_lock"] = {
        "counter_beside_an_idle_thread": round(idle / alone, 2),
        "counter_beside_edge_searches": round(busy / alone, 2),
        "reading": "~0.9: released during a search; ~0.5: held, as by pure Python code",
    }
    return out


async def in_process(svc: Any, queries: list[str], seconds: float, clients: int) -> dict[str, float]:
    from rag_router.search.flow import SearchParams

    counter = iter(range(1 << 40))

    async def client(stop: float) -> int:
        done = 0
        while time.perf_counter() < stop:
            query = queries[next(counter) % len(queries)]
            await svc.searcher.search(SearchParams(query=query, route="both", filters=Filters("default")))
            done += 1
        return done

    await asyncio.gather(*(client(time.perf_counter() + 3) for _ in range(8)))  # warm-up
    gc.collect()
    gc.freeze()
    process, loop = time.process_time(), time.thread_time()
    done = sum(await asyncio.gather(*(client(time.perf_counter() + seconds) for _ in range(clients))))
    return {
        "clients": clients,
        "searches_per_s": round(done / seconds, 1),
        "process_cpu_ms_per_search": round((time.process_time() - process) / done * 1000, 2),
        "event_loop_cpu_ms_per_search": round((time.thread_time() - loop) / done * 1000, 2),
    }


async def run(data_dir: Path, backend: str, seconds: float) -> dict[str, Any]:
    from rag_router.services import build_services
    from rag_router.settings import Settings

    raw = raw_embedder_apart(data_dir, backend)
    gc.set_threshold(50_000, 50, 100)  # as ``rag-router serve``
    settings = Settings(data_dir=data_dir, embedding={"backend": backend, "query_cache": 0})
    svc = await build_services(settings)
    try:
        queries = load_queries()
        edge = edge_parts(svc, queries)
        searcher = await in_process(svc, queries, seconds, 64)
        searcher["over_raw_batched"] = round(searcher["searches_per_s"] / raw["best_qps"], 3)
        return {"raw_embedder": raw, "qdrant_edge": edge, "searcher_in_process": searcher}
    finally:
        await svc.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--backend", default="onnx")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result: dict[str, Any] = {"machine": machine(), "command": " ".join(sys.argv)}
    result.update(asyncio.run(run(args.data_dir, args.backend, args.seconds)))
    emit(result, args.out)


if __name__ == "__main__":
    main()
