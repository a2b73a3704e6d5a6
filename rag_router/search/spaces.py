"""The vector spaces of a split embedder (``indexers.embed.split``): which chunks a query's dense
leg meets, and which of its scores the MiniLM-measured floor and cascade may read. Pure."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from indexers.embed.embedder import AsyncEmbedder, query_function
from indexers.language import text_language
from indexers.records import Vector

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Spaces:
    """``second``: the languages the second model embeds; None: one model for every text."""

    second: frozenset[str] | None = None
    _cache: OrderedDict[str, Any] = field(default_factory=OrderedDict, compare=False)

    @property
    def split(self) -> bool:
        return self.second is not None

    def of(self, query: str) -> str | None:
        """The chunks the query's dense leg meets: those its own model embedded (two models'
        vectors share a dimension, not a space). Measured (SciFact and cn-criminal-law, ONNX):
        MiniLM's weak matches (0.15-0.35) overlap its scores of e5 vectors (up to 0.19). e5 scores
        its own chunks 0.78-1.0 and MiniLM's at most 0.16, so a Chinese query whose implied filters
        leave too few of its own may also meet the others, ranked below (``retrieve_routed``'s
        first rung); not always, since scores of another model are noise against this vector and
        would stretch the leg's DBSF scale."""
        return text_language(query) if self.second is not None else None

    def is_second(self, query: str) -> bool:
        """Whether the second model embeds ``query``: its cosines are not the primary's, on which
        the floor and the cascade's threshold were measured."""
        return self.second is not None and text_language(query) in self.second

    def judged(self, weights: Mapping[str, float], query: str, floor: Any) -> Mapping[str, float]:
        """The weights the relevance floor reads: for a query the second model embeds, its dense
        leg counts only where the floor has a cosine of that model (``Floor.second``); else the
        lexical leg judges alone (e5's unrelated pairs score 0.80-0.86)."""
        if self.is_second(query) and getattr(floor, "second", 2.0) > 1:
            return {**weights, "dense": 0.0}
        return weights

    async def cross(self, embedder: AsyncEmbedder, query: str) -> tuple[Vector, str] | None:
        """The query's vector from the second model, for its space, when the query is not in
        its languages and that model is loaded (it is once a text of its language was stored or
        asked in this process): e5 reads English too, so "How many vacation days do I get?"
        meets the Chinese handbook's chunks. None where there is no second space to meet."""
        if self.second is None or self.is_second(query):
            return None
        secondary = getattr(getattr(embedder, "sync", None), "secondary", None)
        if secondary is None or not secondary.loaded:
            return None
        space = sorted(self.second)[0]
        if (vector := self._cache.get(query)) is None:
            try:
                vector = (await asyncio.to_thread(query_function(secondary.get()), [query]))[0]
            except Exception as exc:  # the search goes on in its own space
                log.warning("no second-model vector for the query (%r)", exc)
                return None
            self._cache[query] = vector
            if len(self._cache) > CROSS_CACHE:
                self._cache.popitem(last=False)
        return vector, space


CROSS_CACHE = 2048  # queries whose second-model vector is kept
