"""The cold tier's tantivy leg split into shards searched side by side (``RAG_ELASTIC__LEXICAL_SHARDS``).

tantivy searches an index's segments one after the other on the calling thread (tantivy-py
offers no executor), and a shallower leg saves nothing (bench/lexical_scale.py: depths 100, 50
and 20 take the same time at 10M documents). Shards searched in threads (tantivy releases the
GIL) would divide the leg's time by up to the cores given to it; each shard scores BM25 with its
own statistics, as an Elasticsearch shard does, so the merged ranking can differ from one
index's. This builds the same documents as lexical_scale.py into one index and into the tier's
``ShardedLexical`` of ``--shards`` (document ``seq`` into shard ``seq % shards``), then times SciFact's 300
test queries, top 100, on one index, on the shards one after the other and on the shards in
threads, and counts how much of one index's top 10 and top 100 the shards' merged lists keep.

    python bench/lexical_shards.py --pool pool.json.gz --scifact ../shared/data/scifact \\
        --docs 10000000 --shards 4 --work /tmp/lexical-shards
"""

from __future__ import annotations

import heapq
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine, percentiles
from bench.lexical_scale import arguments, build, scifact_queries
from indexers.text.lexical import Analyzer
from indexers.tiers.cold_lexical import LexicalIndex
from indexers.tiers.cold_shards import ShardedLexical
from indexers.tiers.query import Filters

K = 100
Hits = list[tuple[int, float]]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--work", type=Path, required=True, help="an empty folder (or one built before)")
    args = parser.parse_args()
    analyzer = Analyzer()
    one = LexicalIndex(args.work / "one")
    sharded = ShardedLexical(args.work / "shards", args.shards)  # the tier's own (cold_shards.py)
    shards = sharded.parts
    out: dict[str, object] = {"machine": machine(), "docs": args.docs, "shards": args.shards}
    if one.index.searcher().num_docs == 0:
        out["build_one_s"] = build(one, args.pool, args.docs, analyzer)
    if shards[0].index.searcher().num_docs == 0:
        out["build_shards_s"] = build(shards, args.pool, args.docs, analyzer)
    out["segments"] = {
        "one": one.index.searcher().num_segments,
        "shards": [s.index.searcher().num_segments for s in shards],
    }
    queries = scifact_queries(args.scifact, analyzer)
    tenant = Filters(tenant="default")

    def alone(terms: list[str]) -> Hits:
        return one.search(terms, tenant, K, by_tenant=False)

    def merged(parts: list[Hits]) -> Hits:
        return heapq.nlargest(K, (h for part in parts for h in part), key=lambda h: h[1])

    def in_turn(terms: list[str]) -> Hits:
        return merged([s.search(terms, tenant, K, by_tenant=False) for s in shards])

    def side_by_side(terms: list[str]) -> Hits:
        return sharded.search(terms, tenant, K, by_tenant=False)

    shapes: dict[str, Callable[[list[str]], Hits]] = {
        "one_index": alone,
        "shards_in_turn": in_turn,
        "shards_in_threads": side_by_side,
    }
    found: dict[str, list[Hits]] = {}
    for name, search in shapes.items():
        ms, got = [], []
        for terms in queries:
            began = time.perf_counter()
            got.append(search(terms))
            ms.append((time.perf_counter() - began) * 1000)
        out[name] = percentiles(ms)
        found[name] = got
    for depth in (10, K):
        kept = [
            len({s for s, _ in a[:depth]} & {s for s, _ in b[:depth]}) / max(1, min(depth, len(a)))
            for a, b in zip(found["one_index"], found["shards_in_threads"], strict=True)
        ]
        out[f"one_index_top{depth}_kept"] = round(sum(kept) / len(kept), 4)
    sharded.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
