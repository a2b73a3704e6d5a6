"""What search asks of a tier, and what one tier's leg answers (the tier seam's vocabulary)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from indexers.records import SPACE_KEY, StoredChunk, Vector

Leg = Literal["dense", "lexical"]
LEGS: tuple[Leg, ...] = ("dense", "lexical")

HitRef = str | int | uuid.UUID  # a tier's own handle on a hit (point id, row number, document _id)


@dataclass(frozen=True, slots=True)
class Range:
    gte: Any = None
    lte: Any = None
    gt: Any = None
    lt: Any = None


SOFT_FIELDS = frozenset({"year", "date"})


@dataclass(frozen=True, slots=True)
class Filters:
    """Validated filters, applied inside every tier before top-k (never after)."""

    tenant: str  # no default: every search names its tenant (the API's one choke point sets it)
    year: Range | None = None
    date: Range | None = None  # bounds are datetime.date
    keywords: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # any-of per key
    # Range fields a chunk may lack and still pass ("year", "date"): the router's implied time
    # filters, read from the query text, keep an undated document instead of dropping it (it is
    # ranked after the dated matches, rag_router/search/soft.py). A chunk that carries the field
    # must still be inside the range. Request filters never set this.
    or_missing: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = self.or_missing - SOFT_FIELDS
        if unknown:
            raise ValueError(f"or_missing takes {sorted(SOFT_FIELDS)}, not {sorted(unknown)}")

    def soft(self, name: str) -> bool:
        """Whether a chunk without the range field ``name`` passes this filter."""
        return name in self.or_missing and getattr(self, name) is not None

    def keyword_terms(self) -> list[list[str]]:
        """One any-of group per key: ``[["tags=a", "tags=b"], ["article=17"]]``."""
        return [[f"{key}={v}" for v in values] for key, values in sorted(self.keywords.items())]


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What a tier searches for: both legs share the filters and the depth."""

    text: str
    terms: Sequence[str]
    vector: Vector | None
    filters: Filters
    k: int = 10
    legs: tuple[Leg, ...] = LEGS
    exact: bool = False  # brute-force dense search (congruence tests, recall checks)
    payload: bool = True  # False: ids and scores only; the caller hydrates the hits it keeps
    # The dense leg's vector space, where the embedder splits by language (``indexers.embed.split``):
    # the language of the chunks whose vectors the query's model wrote. None: every chunk's.
    space: str | None = None
    # Another model's vector of the same query and that model's space: searched as a dense leg of
    # its own ("xdense", ``rag_router.search.retrieve``), so an English question meets the Chinese
    # chunks that the multilingual model embedded. None: no other space.
    cross: tuple[Vector, str] | None = None

    @property
    def dense_filters(self) -> Filters:
        """The dense leg's filters: ``filters``, and only chunks of the query's vector space."""
        if self.space is None:
            return self.filters
        keywords = {**self.filters.keywords, SPACE_KEY: (self.space,)}
        return dataclasses.replace(self.filters, keywords=keywords)


@dataclass(frozen=True, slots=True)
class LegHit:
    """One leg's ranked result inside one tier.

    ``key`` names the chunk the same way in every tier (its point id, derived from tenant and
    chunk id), so fusion can merge tiers; ``ref`` is the tier's own handle for ``hydrate``;
    ``chunk`` is None when the query asked for ids only (``SearchQuery.payload=False``).
    """

    key: int
    score: float
    chunk: StoredChunk | None = None
    ref: HitRef = ""
