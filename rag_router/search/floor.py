"""The relevance floor: whether a hit is relevant at all, from raw leg scores that mean the same
across queries (fused scores do not: DBSF and RRF rank within one query's candidates).

- **dense**: the cosine between the query and the chunk, counted only where the embedder reads
  the query's language (a leg of weight 0 — the Chinese query under the English-only MiniLM —
  never makes a hit relevant, so it never supplies an answer sentence either).
- **lexical**: BM25 divided by the query's number of distinct analysed terms (a long question
  does not clear on the sum of many weak matches) and by the largest IDF a term can have in the
  tier, ln(1 + (N - 0.5) / 1.5) for N chunks (``max_idf``; counted every 30 s, ``Sizes``). IDF
  grows with the store: per term alone, the floor chosen on 665 chunks declined the answer in a
  35-document store (0.44 per term against 1.0). Measured on the dev sets and on stores of 35 of
  their documents (``bench/answer_floor.py``, three seeds; answerable / out-of-corpus declined):
  the IDF bound keeps the whole-set figures (the same AUC: N is fixed there) and, where the
  lexical leg judges alone, cuts small cmrc stores' answerable declined from 0.04-0.09 to
  0.00-0.02 (out-of-corpus 0.92-0.96); beside the dense leg, small squad stores' from 0.02-0.12
  to 0.00-0.06. The share of the query's terms a hit holds (no IDF at all; CJK bigrams weighted
  1-3×) was also measured and rejected: on whole cmrc it declines 0.70-0.81 of out-of-corpus
  questions at the same answerable cost, against 0.90-0.93.

A hit clears the floor when its dense cosine reaches ``dense``, or its lexical score reaches
``lexical`` — or, where the lexical leg judges alone (the dense leg has weight 0, or was not
searched), ``lexical_alone``. Two lexical floors because, measured on the dev sets, a lexical
score means less beside a dense one that already judged (a strong exact match is needed to
overrule a low cosine: 0.77 on qa-squad-dev) than where it is the only evidence (0.17 on
qa-cmrc-trial, whose CJK unigram+bigram terms also score lower per term). When no hit clears
the floor the answer flow declines ("nothing relevant is stored").

A hit that is the clause the question names ("Article 18", "第二十六条": the applied clause filter
matches its metadata) is relevant whatever its scores: the question asked for it by number, and
a short or cross-language question about it can score low on both legs.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_router.search.fuse import Hit, LegScore

log = logging.getLogger(__name__)

COUNT_S = 1.0  # a tier's count past this is skipped (the last size known stays)
UNKNOWN_CHUNKS = 1000  # the size assumed for a tier not yet counted (the dev sets hold 300-700 chunks)


@dataclass(frozen=True, slots=True)
class Floor:
    dense: float  # cosine; -1 lets every dense hit clear
    lexical: float  # BM25 per distinct query term, beside a weighted dense leg; 0: every hit clears
    lexical_alone: float  # ... where the lexical leg judges alone
    # The second model's cosine (multilingual-e5-small, a split embedder's Chinese side): its
    # scores sit far higher than MiniLM's (unrelated pairs 0.80-0.86), so a floor of its own. It
    # judges a second-language query's dense leg and every query's cross-space leg ("xdense");
    # beside it the lexical leg keeps its floor for judging alone. Above 1: never clears.
    second: float = 2.0

    def judge(
        self,
        hits: Sequence[Hit],
        weights: Mapping[str, float],
        terms: Sequence[str],
        named: Mapping[str, Sequence[str]] | None = None,
        *,
        sizes: Mapping[str, int],
        asked: Sequence[bool] | None = None,
        second: bool = False,
    ) -> Relevance:
        """``terms``: the query's distinct analysed terms; ``sizes``: chunks in each searched
        tier (its largest IDF); ``named``: the clause filters applied (field → values), from
        the question's own words; ``asked``: per hit, whether it is the clause of the document
        the question named (``search.named``: it replaces ``named`` when given); ``second``: the
        query's dense leg is the second model's (its floor is ``Floor.second``, and the lexical
        leg judges as if alone beside it)."""
        best: dict[str, float] = {}
        marks = []
        alone = second or self.alone(hits, weights)
        for i, hit in enumerate(hits):
            scores = leg_scores(hit.legs, len(terms), sizes)
            for kind, value in scores.items():
                if weights.get(kind, 1.0) > 0:
                    best[kind] = max(best.get(kind, value), value)
            clause = asked[i] if asked is not None else is_clause(hit.chunk.metadata, named or {})
            marks.append(clause or self.clears(scores, weights, alone=alone, second=second))
        return Relevance(marks, best, self, {k for k, w in weights.items() if w == 0}, second)

    @staticmethod
    def alone(hits: Sequence[Hit], weights: Mapping[str, float]) -> bool:
        """Whether the lexical leg judges alone: the dense leg has weight 0 or returned nothing."""
        dense = any(name.endswith("dense") for h in hits for name in h.legs)
        return weights.get("dense", 1.0) == 0 or not dense

    def clears(
        self, scores: Mapping[str, float], weights: Mapping[str, float], *, alone: bool, second: bool = False
    ) -> bool:
        floors = {
            "dense": self.second if second else self.dense,
            "xdense": self.second,
            "lexical": self.lexical_alone if alone else self.lexical,
        }
        return any(
            weights.get(kind, 1.0) > 0 and kind in floors and value >= floors[kind]
            for kind, value in scores.items()
        )


def is_clause(metadata: Mapping[str, Any], named: Mapping[str, Sequence[str]]) -> bool:
    """Whether a chunk is one of the clauses the filters name ("article" → ("18",))."""
    return any(str(metadata.get(f)) in set(map(str, v)) for f, v in named.items())


def max_idf(chunks: int) -> float:
    """BM25's IDF of a term found in one chunk of ``chunks``: the largest any term has there."""
    return math.log(1 + (max(chunks, 1) - 0.5) / 1.5)


def leg_scores(legs: Mapping[str, LegScore], terms: int, sizes: Mapping[str, int]) -> dict[str, float]:
    """Leg kind → the hit's comparable score: the best over tiers ("hot.dense", "cold.dense");
    lexical per distinct query term over the tier's largest IDF."""
    out: dict[str, float] = {}
    for name, leg in legs.items():
        tier, _, kind = name.rpartition(".")
        if not tier:  # "rerank": a second look, not a retrieval leg; the floor reads the raw legs
            continue
        value = leg.score
        if kind == "lexical":  # no size given (unit tests): per term only
            value /= max(terms, 1) * (max_idf(sizes[tier]) if tier in sizes else 1.0)
        out[kind] = max(out.get(kind, value), value)
    return out


class Sizes:
    """Chunks per tier, for the IDF bound: counted at most every ``ttl_s`` (a count can cost a
    scan; a store's size moves slowly against the floor's ~5 % steps)."""

    def __init__(self, tiers: Mapping[Any, Any], ttl_s: float = 30.0) -> None:
        self._tiers = tiers
        self._ttl_s = ttl_s
        self._seen: dict[str, tuple[float, int]] = {}

    async def get(self, names: Iterable[str]) -> dict[str, int]:
        """Chunks in each of ``names`` (the tiers that answered this search). A count that fails or
        takes over ``COUNT_S`` keeps the last size known, or ``UNKNOWN_CHUNKS`` (as does a tier
        with no count): the search that asked is never failed, nor held up long, by it."""
        now = time.monotonic()
        wanted = list(names)
        for name in wanted:
            seen = self._seen.get(name)
            if seen is not None and now - seen[0] <= self._ttl_s:
                continue
            count = getattr(self._tiers.get(name), "count", None)  # a bare SearchTier has none
            try:
                size = UNKNOWN_CHUNKS if count is None else int(await asyncio.wait_for(count(), COUNT_S))
            except Exception as exc:
                log.info("floor: counting tier %s failed (%s): its last size stays", name, exc)
                size = seen[1] if seen is not None else UNKNOWN_CHUNKS
            self._seen[name] = (now, size)
        return {name: self._seen[name][1] for name in wanted if name in self._seen}


@dataclass(frozen=True, slots=True)
class Relevance:
    """Per hit, whether it cleared the floor; the best comparable score of each weighted leg."""

    marks: list[bool]
    best: dict[str, float]
    floor: Floor
    unweighted: set[str] = field(default_factory=set)
    second: bool = False  # the dense leg was the second model's

    @property
    def alone(self) -> bool:
        return self.second or "dense" in self.unweighted or "dense" not in self.best

    @property
    def any(self) -> bool:
        return any(self.marks)

    def reason(self) -> str:
        """Why nothing cleared the floor, in the route's reason."""
        shown = []
        lexical = self.floor.lexical_alone if self.alone else self.floor.lexical
        dense = self.floor.second if self.second else self.floor.dense
        for kind, floor, unit in (
            ("dense", dense, "cosine"),
            ("xdense", self.floor.second, "cosine in the other model's space"),
            ("lexical", lexical, "BM25 per query term / max IDF"),
        ):
            if kind in self.unweighted:
                shown.append(f"{kind} not counted")
            elif kind in self.best:
                shown.append(f"best {kind} {unit} {self.best[kind]:.3f} < {floor:g}")
        detail = "; ".join(shown) or "no hits"
        return f"declined: no hit clears the relevance floor ({detail})"
