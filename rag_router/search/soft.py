"""Undated hits kept by a soft (implied) time filter rank after the dated matches. Pure.

The router reads "2023年以后", "last year" or "in 2021" from the query and filters on the time
it names, but a document without a date field (a news item dated only in its text) may be the
one asked for: the tiers keep it (``Filters.or_missing``) and this scales its fused score by the
policy's ``undated_factor``, so a dated match that is about as relevant ranks first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from indexers.records import metadata_year, parse_date
from indexers.tiers.query import Filters
from rag_router.search.fuse import Hit


def rank_undated_after(hits: Sequence[Hit], filters: Filters, factor: float, reasons: list[str]) -> list[Hit]:
    """``hits`` with the undated ones' scores × ``factor``, re-sorted (stable); says so in
    ``reasons`` when any was scaled. A hit is undated when it lacks every soft time field.
    When none is dated (a corpus without dates) there is nothing to rank them after: unchanged."""
    soft = [name for name in ("year", "date") if filters.soft(name)]
    if not soft or factor >= 1.0:
        return list(hits)
    scaled = [dataclasses.replace(h, score=h.score * factor) if _undated(h, soft) else h for h in hits]
    moved = sum(a is not b for a, b in zip(hits, scaled, strict=True))
    if not moved or moved == len(hits):
        return list(hits)
    reasons.append(f"{moved} undated hit(s) kept by the implied time filter, score × {factor:g}")
    return sorted(scaled, key=lambda h: -h.score)


def _undated(hit: Hit, soft: list[str]) -> bool:
    metadata = hit.chunk.metadata
    present = {
        "year": metadata_year(metadata) is not None,
        "date": parse_date(metadata.get("date")) is not None,
    }
    return not any(present[name] for name in soft)
