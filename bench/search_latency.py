"""Single-client search latency, in-process, on an index built by ``rag-router eval --data-dir``.

Reports the raw query-embedding time and the whole search (top_k 10, default depth) per route,
so the retrieval overhead on top of the embedder is visible.

    rag-router eval ../shared/data/scifact --data-dir /tmp/sf --tier cold   # builds the index once
    python bench/search_latency.py --data ../shared/data/scifact --data-dir /tmp/sf
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from _common import machine, percentiles

from indexers.tiers.query import Filters
from rag_router.search.flow import SearchParams
from rag_router.services import build_services
from rag_router.settings import get_settings


async def measure(data: Path, data_dir: Path, n: int) -> dict[str, Any]:
    with (data / "queries.jsonl").open(encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f][:n]
    services = await build_services(get_settings(data_dir=data_dir, log_level="WARNING"))
    try:
        embed_ms = []
        for text in texts:
            started = time.perf_counter()
            services.embedder.embed([text])
            embed_ms.append((time.perf_counter() - started) * 1000)
        out: dict[str, Any] = {
            "machine": machine(),
            "queries": len(texts),
            "embed_one": percentiles(embed_ms),
        }
        counts = {name: await tier.count() for name, tier in services.tiers.items()}
        out["chunks"] = counts
        for route in ("hot", "cold", "both"):
            total = []
            for text in texts:
                started = time.perf_counter()
                await services.searcher.search(
                    SearchParams(query=text, top_k=10, route=route, filters=Filters("default"))
                )  # type: ignore[arg-type]
                total.append((time.perf_counter() - started) * 1000)
            out[f"search_{route}"] = percentiles(total)
        return out
    finally:
        await services.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="BEIR folder whose queries.jsonl to replay")
    parser.add_argument(
        "--data-dir", type=Path, required=True, help="index built by rag-router eval --data-dir"
    )
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.data, args.data_dir, args.queries)), indent=2))


if __name__ == "__main__":
    main()
