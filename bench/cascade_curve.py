"""The cascade's trade-off: nDCG@10 against the share of queries that touch the cold tier.

For every query the hot tier is searched alone (its best dense score s is what the cascade
looks at) and both tiers together; a threshold t sends a query to cold as well when s < t.
The threshold is chosen on the *train* queries (the smallest t whose nDCG@10 reaches the
target share of both-tiers nDCG) and reported on the *test* queries. So it needs a dataset with
``qrels/train.tsv`` and ``qrels/test.tsv`` (of ../shared/data only scifact has a train split) and an
index of it built with a tier split (documents in both tiers), e.g.

    rag-router eval ../shared/data/scifact --route both --tier-split 0.3 --data-dir /tmp/sf-split
    python bench/cascade_curve.py --data ../shared/data/scifact --data-dir /tmp/sf-split

The curve goes to ``--out``, by default ``evals/cascade.json`` in the service's data dir
(``RAG_DATA_DIR``, default ``.rag-data``), where the page's Evaluate tab draws it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from indexers.tiers.query import Filters
from rag_router.evaluation.retrieval import load_dataset, score
from rag_router.owner import current_owner
from rag_router.search.flow import SearchParams, hits_by_doc
from rag_router.services import build_services
from rag_router.settings import get_settings

SPLITS = ("train", "test")
BUILD_HINT = "build it with `rag-router eval {data} --route both --tier-split 0.3 --data-dir {index}`"
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


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The arguments, checked before anything is loaded: a missing split or index is an argparse
    error naming what is missing and how to make it, never a traceback."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="BEIR-layout dataset with a train split")
    parser.add_argument("--data-dir", type=Path, required=True, help="its index, built with --tier-split")
    parser.add_argument(
        "--target", type=float, default=0.98, help="share of both-tiers nDCG to keep on train"
    )
    parser.add_argument(
        "--out",
        default=None,
        help="where the curve goes ('-': stdout); default: evals/cascade.json in RAG_DATA_DIR (.rag-data)",
    )
    args = parser.parse_args(argv)
    problem = dataset_problem(args.data) or index_problem(args.data, args.data_dir)
    if problem:
        parser.error(problem)
    if args.out is None:
        args.out = str(get_settings().data_dir / "evals" / "cascade.json")
    return args


def dataset_problem(data: Path) -> str | None:
    if not data.is_dir():
        return f"no dataset folder {data}"
    if not any((data / name).is_file() for name in ("queries.jsonl", "queries.jsonl.gz")):
        return f"no queries.jsonl in DATASET {data}: --data takes a BEIR-layout folder"
    for split in SPLITS:
        if not (data / "qrels" / f"{split}.tsv").is_file():
            why = "the threshold is chosen on its queries" if split == "train" else "the curve is shown on it"
            return (
                f"no qrels/{split}.tsv in DATASET {data}: {why}; use a dataset with both splits "
                "(../shared/data/scifact has them)"
            )
    return None


def index_problem(data: Path, index: Path) -> str | None:
    if not (index / "index.json").is_file():
        return f"no index in --data-dir {index}: " + BUILD_HINT.format(data=data, index=index)
    owner = current_owner(index)
    if owner:  # the embedded engines open in one process only
        return (
            f"the index in --data-dir {index} is held by `rag-router serve` (pid {owner.pid}, "
            f"{owner.url}): stop it first, or build a copy elsewhere: "
            + BUILD_HINT.format(data=data, index="ANOTHER_DIR")
        )
    return None


async def tier_counts(data_dir: Path) -> dict[str, int]:
    services = await build_services(get_settings(data_dir=data_dir, log_level="WARNING"))
    try:
        return {name: await tier.count() for name, tier in services.tiers.items()}
    finally:
        await services.close()


def write(result: dict[str, Any], out: str) -> None:
    text = json.dumps(result, indent=2)
    if out == "-":
        print(text)
        return
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")
    print(f"cascade curve written to {path}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    counts = asyncio.run(tier_counts(args.data_dir))
    if not all(counts.values()):
        sys.exit(
            f"cascade_curve.py: the index in {args.data_dir} is not split between the tiers "
            f"(chunks: {counts}); " + BUILD_HINT.format(data=args.data, index=args.data_dir)
        )
    result: dict[str, Any] = {}
    for split in SPLITS:
        qrels, rows = asyncio.run(per_query(args.data, args.data_dir, split))
        result[split] = curve(qrels, rows)
    chosen = next((c["threshold"] for c in result["train"] if c["vs_both"] >= args.target), THRESHOLDS[-1])
    result["chosen_threshold"] = chosen
    result["test_at_chosen"] = next(c for c in result["test"] if c["threshold"] == chosen)
    write(result, args.out)


if __name__ == "__main__":
    main()
