"""BEIR-layout evaluation: ingest a corpus, run every judged query, score the ranking.

Metrics come from pytrec_eval (trec_eval's own code): nDCG@10, recall@100, MRR@10;
success@1 is the share of queries whose first document is relevant. Documents rank where
their best chunk ranks. Latency is the in-process search time per query.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import gzip
import json
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytrec_eval

from indexers.ingest.load import load_jsonl
from indexers.records import DEFAULT_TENANT, Document
from indexers.tiers.query import LEGS, Filters, Leg
from rag_router.search.flow import Searcher, SearchParams, hits_by_doc
from rag_router.search.route import RouteName

Qrels = dict[str, dict[str, int]]
# The headline figures of a report, in the order people read them.
SUMMARY_KEYS = (
    "ndcg@10",
    "recall@100",
    "mrr@10",
    "success@1",
    "cold_share",
    "latency_ms_p50",
    "latency_ms_p99",
    "queries",
)


@dataclass(frozen=True, slots=True)
class Dataset:
    path: Path
    queries: dict[str, str]
    kinds: dict[str, str]
    qrels: Qrels

    def corpus(self) -> Iterator[Document]:
        for name in ("corpus.jsonl", "corpus.jsonl.gz"):
            if (self.path / name).exists():
                yield from (d for d in load_jsonl(self.path / name) if isinstance(d, Document))
                return
        raise FileNotFoundError(f"no corpus.jsonl[.gz] in {self.path}")


def split_dates(doc: Document, share_hot: float, today: dt.date) -> Document:
    """Re-date a document for routing experiments, deterministically by its id.

    h = crc32(id) mod 1000. If h < share_hot·1000 the document is dated h mod 300 days before
    ``today`` (inside a 365-day hot window), otherwise 2015-01-01 + h·2 days (2015–2020, cold).
    """
    h = zlib.crc32(doc.id.encode("utf-8")) % 1000
    if h < share_hot * 1000:
        day = today - dt.timedelta(days=h % 300)
    else:
        day = dt.date(2015, 1, 1) + dt.timedelta(days=h * 2)
    metadata = {**doc.metadata, "date": day.isoformat(), "year": day.year}
    return dataclasses.replace(doc, metadata=metadata)


def load_dataset(path: Path, split: str = "test") -> Dataset:
    qrels: Qrels = {}
    with (path / "qrels" / f"{split}.tsv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    queries: dict[str, str] = {}
    kinds: dict[str, str] = {}
    opener = gzip.open if (path / "queries.jsonl.gz").exists() else open
    qfile = path / ("queries.jsonl.gz" if opener is gzip.open else "queries.jsonl")
    with opener(qfile, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record["_id"] in qrels:
                queries[record["_id"]] = record["text"]
                if record.get("kind"):
                    kinds[record["_id"]] = record["kind"]
    return Dataset(path, queries, kinds, {q: r for q, r in qrels.items() if q in queries})


def score(run: dict[str, list[str]], qrels: Qrels) -> dict[str, float]:
    """Mean metrics over the judged queries (a query with no hits scores 0)."""
    as_run = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in run.items()}
    top10 = {q: {d: s for d, s in ranked.items() if s > len(run[q]) - 10} for q, ranked in as_run.items()}
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(as_run)
    mrr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    n = len(qrels)

    def mean(values: Callable[[str], float]) -> float:
        return sum(values(q) for q in qrels) / n if n else 0.0

    return {
        "ndcg@10": mean(lambda q: full.get(q, {}).get("ndcg_cut_10", 0.0)),
        "recall@100": mean(lambda q: full.get(q, {}).get("recall_100", 0.0)),
        "mrr@10": mean(lambda q: mrr.get(q, {}).get("recip_rank", 0.0)),
        "success@1": mean(lambda q: float(bool(run.get(q)) and qrels[q].get(run[q][0], 0) > 0)),
    }


async def run_queries(
    searcher: Searcher, dataset: Dataset, *, route: RouteName = "both", legs: tuple[Leg, ...] = LEGS
) -> dict[str, Any]:
    run: dict[str, list[str]] = {}
    latencies: list[float] = []
    touched_cold = 0
    for qid, text in dataset.queries.items():
        started = time.perf_counter()
        outcome = await searcher.search(
            SearchParams(
                query=text, top_k=300, route=route, legs=legs, depth=300, filters=Filters(DEFAULT_TENANT)
            )
        )
        latencies.append((time.perf_counter() - started) * 1000)
        run[qid] = hits_by_doc(outcome.hits)[:100]
        touched_cold += "cold" in outcome.tiers
    report: dict[str, Any] = score(run, dataset.qrels)
    report["cold_share"] = touched_cold / len(run) if run else 0.0
    report["latency_ms_p50"] = float(np.percentile(latencies, 50)) if latencies else 0.0
    report["latency_ms_p99"] = float(np.percentile(latencies, 99)) if latencies else 0.0
    report["queries"] = len(run)
    by_kind: dict[str, dict[str, float]] = {}
    for kind in sorted(set(dataset.kinds.values())):
        qids = {q for q, k in dataset.kinds.items() if k == kind}
        by_kind[kind] = score({q: run[q] for q in qids}, {q: dataset.qrels[q] for q in qids})
        by_kind[kind]["queries"] = len(qids)
    report["by_kind"] = by_kind
    return report
