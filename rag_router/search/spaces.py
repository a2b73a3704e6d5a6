"""The vector spaces of a split embedder (``indexers.embed.split``): which chunks a query's dense
leg meets, and which of its scores the MiniLM-measured floor and cascade may read. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from indexers.language import text_language


@dataclass(frozen=True, slots=True)
class Spaces:
    """``second``: the languages the second model embeds; None: one model for every text."""

    second: frozenset[str] | None = None

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

    def judged(self, weights: Mapping[str, float], query: str) -> Mapping[str, float]:
        """The weights the relevance floor reads: for a query the second model embeds, the
        lexical leg judges alone (e5's unrelated pairs score 0.7-0.8), as before it was there."""
        return {**weights, "dense": 0.0} if self.is_second(query) else weights
