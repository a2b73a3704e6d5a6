"""The cold tier's tantivy leg alone at a size this machine can build: three query shapes.

Builds a ``LexicalIndex`` of ``--docs`` documents (a title and 2-6 pool sentences each, as
bench/scale_corpus.py recombines them; written as a bulk load writes: 8 threads, 512 MB, a
commit every 100k), then times SciFact's 300 test queries, top 100, as the union of their terms under
the tenant's term, as the bare union with tantivy's total count, and as the bare union without it;
then as the tier searches a store of one tenant (that last shape) at depths 100, 50 and 20.

    python bench/lexical_scale.py --pool pool.json.gz --scifact ../shared/data/scifact \\
        --docs 10000000 --index /tmp/lexical-10m
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine, percentiles
from indexers.text.lexical import Analyzer
from indexers.tiers.cold_lexical import LexicalIndex
from indexers.tiers.query import Filters

BATCH = 100_000


def build(index: LexicalIndex | list[LexicalIndex], pool: Path, docs: int, analyzer: Analyzer) -> float:
    """Index ``docs`` recombined documents; with several indexes, document ``seq`` goes to the
    ``seq % len(indexes)``th (the same documents as into one: bench/lexical_shards.py)."""
    indexes = index if isinstance(index, list) else [index]
    with gzip.open(pool, "rt", encoding="utf-8") as f:
        words = json.load(f)
    sentences = [" ".join(analyzer.terms(s)) for s in words["sentences"]]
    titles = [" ".join(analyzer.terms(t)) for t in words["titles"]]
    rng = np.random.default_rng(1)
    for each in indexes:
        each.reopen_writer(threads=max(1, 8 // len(indexes)), heap_mb=max(64, 512 // len(indexes)))
    began = time.perf_counter()
    for start in range(0, docs, BATCH):
        n = min(BATCH, docs - start)
        picks, sizes = rng.integers(0, len(sentences), size=(n, 6)), rng.integers(2, 7, size=n)
        named = rng.integers(0, len(titles), size=n)
        rows: list[tuple[Any, ...]] = [
            (
                start + i + 1,
                "default",
                titles[named[i]] + " " + " ".join(sentences[j] for j in picks[i, : sizes[i]]),
                None,
                None,
                [],
            )
            for i in range(n)
        ]
        for i, each in enumerate(indexes):
            each.add(rows[(i - start - 1) % len(indexes) :: len(indexes)], [], new_above=docs + 1)
            each.commit(start + n)
    for each in indexes:  # merges done; a writer of one thread, as the tier keeps between loads
        each.reopen_writer(threads=1, heap_mb=64)
    return round(time.perf_counter() - began, 1)


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """What both lexical benches take (this one and lexical_shards.py): the pool, SciFact, the size."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", type=Path, required=True, help="bench/scale_corpus.py pool's output")
    parser.add_argument("--scifact", type=Path, required=True, help="SciFact in BEIR layout (its queries)")
    parser.add_argument("--docs", type=int, default=3_000_000)
    return parser


def scifact_queries(scifact: Path, analyzer: Analyzer) -> list[list[str]]:
    """SciFact's 300 test queries as lexical terms (each term once)."""
    with (scifact / "qrels" / "test.tsv").open(encoding="utf-8") as f:
        tested = {line.split("\t")[0] for line in f}
    with (scifact / "queries.jsonl").open(encoding="utf-8") as f:
        texts = [q["text"] for q in map(json.loads, f) if q["_id"] in tested]
    return [list(dict.fromkeys(analyzer.terms(t))) for t in texts]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--index", type=Path, required=True, help="an empty folder (or one built before)")
    args = parser.parse_args()
    analyzer = Analyzer()
    index = LexicalIndex(args.index)
    out: dict[str, object] = {"machine": machine(), "docs": args.docs}
    if index.index.searcher().num_docs == 0:
        out["build_s"] = build(index, args.pool, args.docs, analyzer)
    out["segments"] = index.index.searcher().num_segments
    queries = scifact_queries(args.scifact, analyzer)
    schema, tenant = index.schema, Filters(tenant="default")

    def bare(terms: list[str], count: bool) -> object:
        union = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "terms", t)) for t in terms]
        )
        return index.index.searcher().search(union, limit=100, count=count).hits

    def alone(terms: list[str], k: int) -> object:
        return index.search(terms, tenant, k, by_tenant=False)

    shapes: dict[str, Callable[[list[str]], object]] = {
        "under_the_tenant_term": lambda t: index.search(t, tenant, 100, by_tenant=True),
        "bare_with_count": lambda t: bare(t, True),
        "bare_no_count": lambda t: bare(t, False),
        # the tier's own call (a store of one tenant), at the fusion's depth and shallower ones
        **{f"search_k{k}": functools.partial(alone, k=k) for k in (100, 50, 20)},
    }
    for name, search in shapes.items():
        ms = []
        for terms in queries:
            began = time.perf_counter()
            search(terms)
            ms.append((time.perf_counter() - began) * 1000)
        out[name] = percentiles(ms)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
