"""Pages of the embedded hot tier's documents, without a facet of every shard on every page.

A page needs every matching document id in order (Qdrant orders and ranges only numbers and
dates, never a keyword), so each shard's ids come from an exact facet on ``doc_id``. On a shard
of 500k chunks that facet took 3.2 s on 2 cores, and it ran on every page: a page of 500 took
3.5 s and a walk of every page hours (``bench/hot_scale.py``). ``Facets`` keeps each shard's
sorted ids and chunk counts under a filter until that shard is written (``EdgeShards`` counts
each shard's writes, and a write that changes nothing is not counted); a page is then a bisect
and a merge of the shards' ids after the cursor. A sealed shard is written only when a chunk it
holds is replaced or deleted, so a listing keeps its facets while new documents arrive.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from bisect import bisect_right
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import qdrant_edge as qe

from indexers.tiers.edge_shard import scroll, tenant_filter
from indexers.tiers.listing import FIRST_KEYS, DocumentPage, DocumentQuery, page_of, summaries, title_matches

# Document ids the kept facets may hold together (~100 bytes each): the least recently used
# facet goes first past it; the one just made is always kept.
BUDGET = 2_000_000
EVERY = (1 << 31) - 1  # a facet's limit that keeps every value (ids are at most the points)

Listed = tuple[str, int, qe.EdgeShard]  # a shard's name, the writes it has seen, the shard


@dataclass(frozen=True, slots=True)
class Facet:
    """A shard's matching documents: ids in code-point order, and each one's chunk count."""

    ids: list[str]
    counts: dict[str, int]


class Facets:
    """Each shard's facet under a filter, kept until the shard is written (thread-safe)."""

    def __init__(self, budget: int = BUDGET) -> None:
        self._budget = budget
        self._kept: OrderedDict[tuple[str, int, str], Facet] = OrderedDict()
        self._totals: OrderedDict[tuple[tuple[str, int, str], ...], int] = OrderedDict()
        self._lock = threading.Lock()
        self.made = 0  # facets computed (the rest were kept ones): for tests and benches

    def of(self, listed: Listed, qfilter: qe.Filter, key: str) -> Facet:
        name, writes, shard = listed
        kept_as = (name, writes, key)
        with self._lock:
            if (kept := self._kept.get(kept_as)) is not None:
                self._kept.move_to_end(kept_as)
                return kept
        hits = shard.facet(qe.FacetRequest("doc_id", limit=EVERY, exact=True, filter=qfilter)).hits
        counts = {str(hit.value): hit.count for hit in hits}
        facet = Facet(sorted(counts), counts)
        with self._lock:
            self.made += 1
            self._kept[kept_as] = facet
            held = sum(len(f.ids) for f in self._kept.values())
            while held > self._budget and len(self._kept) > 1:
                _, gone = self._kept.popitem(last=False)
                held -= len(gone.ids)
        return facet

    def total(self, keys: tuple[tuple[str, int, str], ...], facets: Sequence[Facet]) -> int:
        """Distinct ids over the shards' facets (a document's chunks may lie in several)."""
        with self._lock:
            if (kept := self._totals.get(keys)) is not None:
                return kept
        held = [f for f in facets if f.ids]
        largest = max(held, key=lambda f: len(f.ids), default=None)
        others: set[str] = set()
        for f in held:
            if f is not largest:
                others.update(d for d in f.ids if largest is None or d not in largest.counts)
        total = (len(largest.ids) if largest is not None else 0) + len(others)
        with self._lock:
            self._totals[keys] = total
            while len(self._totals) > 64:
                self._totals.popitem(last=False)
        return total

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._totals.clear()


def _after(facets: Sequence[Facet], after: str | None, limit: int) -> tuple[list[str], bool]:
    """The first ``limit`` distinct ids after the cursor over every facet, and whether more follow."""
    tails = [
        itertools.islice(f.ids, bisect_right(f.ids, after) if after is not None else 0, None) for f in facets
    ]
    out: list[str] = []
    for doc_id in heapq.merge(*tails):
        if not out or out[-1] != doc_id:
            out.append(doc_id)
            if len(out) > limit:
                break
    return out[:limit], len(out) > limit


def document_page(
    listed: Sequence[Listed], query: DocumentQuery, qfilter: qe.Filter, facets: Facets
) -> DocumentPage:
    """A page over shards that each hold a chunk id at most once: the page's ids after the cursor
    from the shards' facets (a scroll of titles under ``title_prefix``, which no payload index
    answers), then their first chunks."""
    if query.title_prefix is None:
        key = repr(query.filters)
        held = [facets.of(shard, qfilter, key) for shard in listed]
        ids, more = _after(held, query.after, query.limit)
        counts = {d: sum(f.counts.get(d, 0) for f in held) for d in ids}
        total = facets.total(tuple((name, writes, key) for name, writes, _ in listed), held)
    else:
        titled: Counter[str] = Counter()
        for _, _, shard in listed:
            for page in scroll(shard, qfilter, keys=["doc_id", "title"]):
                payloads = (r.payload or {} for r in page)
                titled.update(
                    p["doc_id"] for p in payloads if title_matches(p.get("title"), query.title_prefix)
                )
        ids, more = page_of(titled, query.after, query.limit)
        counts, total = dict(titled), len(titled)
    return DocumentPage(summaries(ids, counts, first_chunks(listed, query.filters.tenant, ids)), total, more)


def first_chunks(listed: Sequence[Listed], tenant: str, ids: list[str]) -> list[dict[str, Any]]:
    """The payloads of the documents' chunks (``summaries`` keeps each one's lowest-numbered)."""
    if not ids:
        return []
    first = tenant_filter(tenant, ids)
    return [
        dict(r.payload or {})
        for _, _, s in listed
        for page in scroll(s, first, keys=FIRST_KEYS)
        for r in page
    ]
