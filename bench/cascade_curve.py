"""The cascade's trade-off: nDCG@10 against the share of queries that touch the cold tier.

For every query the hot tier is searched alone (its best dense score s is what the cascade
looks at) and both tiers together; a threshold t sends a query to cold as well when s < t.
The threshold is chosen on the *train* queries (the smallest t whose nDCG@10 reaches the
target share of both-tiers nDCG) and reported on the *test* queries. Needs an index built with
a tier split, e.g.

    rag-router eval ../shared/data/scifact --route both --tier-split 0.3 --data-dir /tmp/sf-split
    python bench/cascade_curve.py --data ../shared/data/scifact --data-dir /tmp/sf-split
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np

from indexers.tiers.query import Filters
from rag_router.evaluate import load_dataset, score
from rag_router.search.flow import SearchParams, hits_by_doc
from rag_router.services import build_services
from rag_router.settings import get_settings

THRESHOLDS = [round(t, 2) for t in np.arange(0.30, 0.86, 0.05)]


async def per_query(data: Path, data_dir: Path, split: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    dataset = load_dataset(data, split)
    services = await build_services(get_settings(data_dir=data_dir, log_level="WARNING"))
    rows = []
    try:
        for qid, text in dataset.queries.items():
            hot = await services.searcher.search(
                SearchParams(text, top_k=100, route="hot", filters=Filters("default"))
            )
            both = await services.searcher.search(
                SearchParams(text, top_k=100, route="both", filters=Filters("default"))
            )
            dense = [h.legs["hot.dense"].score for h in hot.hits if "hot.dense" in h.legs]
            rows.append(
                {
                    "qid": qid,
                    "s": max(dense, default=-1.0),
                    "hot": hits_by_doc(hot.hits),
                    "both": hits_by_doc(both.hits),
                }
            )
    finally:
        await services.close()
    return dataset.qrels, rows


def curve(qrels: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, float]]:
    both = score({r["qid"]: r["both"] for r in rows}, qrels)["ndcg@10"]
    out = []
    for t in THRESHOLDS:
        run = {r["qid"]: (r["hot"] if r["s"] >= t else r["both"]) for r in rows}
        cold = sum(1 for r in rows if r["s"] < t) / len(rows)
        ndcg = score(run, qrels)["ndcg@10"]
        out.append(
            {
                "threshold": t,
                "ndcg@10": round(ndcg, 4),
                "vs_both": round(ndcg / both, 4),
                "cold_share": round(cold, 3),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument(
        "--target", type=float, default=0.98, help="share of both-tiers nDCG to keep on train"
    )
    args = parser.parse_args()
    result: dict[str, Any] = {}
    for split in ("train", "test"):
        qrels, rows = asyncio.run(per_query(args.data, args.data_dir, split))
        result[split] = curve(qrels, rows)
    chosen = next((c["threshold"] for c in result["train"] if c["vs_both"] >= args.target), THRESHOLDS[-1])
    result["chosen_threshold"] = chosen
    result["test_at_chosen"] = next(c for c in result["test"] if c["threshold"] == chosen)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
