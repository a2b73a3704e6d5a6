"""Domain models shared by the storage layer and the query path.

They are frozen dataclasses: the wire models live in ``rag_router.api.schemas``.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

TierName = Literal["hot", "cold"]
Leg = Literal["dense", "lexical"]
LEGS: tuple[Leg, ...] = ("dense", "lexical")
DEFAULT_TENANT = "default"

# Metadata keys that become exact-match (keyword) filters in every tier. Anything else in
# a document's metadata is stored and returned but cannot be filtered on: a filter on it
# is rejected instead of being silently ignored.
KEYWORD_FIELDS: frozenset[str] = frozenset(
    {"article", "section", "chapter", "amendment", "law", "source", "lang", "kind", "unit", "author"}
)
FILTERABLE_FIELDS: frozenset[str] = KEYWORD_FIELDS | {"year", "date", "tags", "doc_id"}

Vector = npt.NDArray[np.float32]


def content_hash(*parts: str) -> str:
    """A short, stable fingerprint of text (used for ids and change detection)."""
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def parse_date(value: Any) -> dt.date | None:
    """Accept ``date``, ``datetime`` or ISO strings ("2020-01-31", "2020-01-31T10:00:00Z")."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value[:10])
        except ValueError:
            return None
    return None


def metadata_year(metadata: Mapping[str, Any]) -> int | None:
    """``year`` when given as an integer, else the year of ``date``."""
    year = metadata.get("year")
    if isinstance(year, int) and not isinstance(year, bool):
        return year
    date = parse_date(metadata.get("date"))
    return date.year if date else None


class _Dated:
    """``date`` and ``year`` read from ``metadata`` (shared by Document and Chunk)."""

    __slots__ = ()
    metadata: Mapping[str, Any]

    @property
    def date(self) -> dt.date | None:
        return parse_date(self.metadata.get("date"))

    @property
    def year(self) -> int | None:
        return metadata_year(self.metadata)


@dataclass(frozen=True, slots=True)
class Document(_Dated):
    """A source document as it arrives: text plus optional title and metadata."""

    id: str
    text: str
    title: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    tenant: str = DEFAULT_TENANT
    page_starts: tuple[int, ...] = ()  # paged sources (PDF): offset in ``text`` of each page


@dataclass(frozen=True, slots=True)
class Chunk(_Dated):
    """A token-bounded piece of a document; the unit that is embedded, stored and retrieved."""

    chunk_id: str
    doc_id: str
    n: int
    text: str
    title: str | None
    metadata: Mapping[str, Any]
    tenant: str = DEFAULT_TENANT

    @property
    def content_hash(self) -> str:
        return content_hash(self.title or "", self.text, repr(sorted(self.metadata.items())))

    @property
    def embed_text(self) -> str:
        """What the embedder and the lexical analyzer see: the title gives a chunk its context."""
        return f"{self.title}\n{self.text}" if self.title else self.text

    @property
    def tags(self) -> tuple[str, ...]:
        tags = self.metadata.get("tags") or ()
        return tuple(str(t) for t in tags) if isinstance(tags, list | tuple) else (str(tags),)

    def keywords(self) -> list[str]:
        """The exact-match filter terms of this chunk, as ``key=value`` strings."""
        terms = [f"doc_id={self.doc_id}"] + [f"tags={t}" for t in self.tags]
        for key in sorted(KEYWORD_FIELDS):
            value = self.metadata.get(key)
            if value is not None and value != "":
                terms.append(f"{key}={value}")
        return terms


@dataclass(frozen=True, slots=True)
class EmbeddedChunk:
    chunk: Chunk
    vector: Vector


@dataclass(frozen=True, slots=True)
class Range:
    gte: Any = None
    lte: Any = None
    gt: Any = None
    lt: Any = None


@dataclass(frozen=True, slots=True)
class Filters:
    """Validated filters, applied inside every tier before top-k (never after)."""

    tenant: str = DEFAULT_TENANT
    year: Range | None = None
    date: Range | None = None  # bounds are datetime.date
    keywords: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # any-of per key

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


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk as a tier returns it."""

    chunk_id: str
    doc_id: str
    text: str
    title: str | None
    metadata: Mapping[str, Any]
    content_hash: str


_KEY_NAMESPACE = uuid.UUID("5b0c6a36-7c4e-4a55-9d55-2b7b8f3a7e10")


HitRef = str | int | uuid.UUID  # a tier's own handle on a hit (point id, row number, document _id)


@functools.lru_cache(maxsize=65_536)
def chunk_uuid(tenant: str, chunk_id: str) -> uuid.UUID:
    """A deterministic UUID per (tenant, chunk): the chunk's Qdrant point id."""
    return uuid.uuid5(_KEY_NAMESPACE, f"{tenant}\x00{chunk_id}")


def chunk_key(tenant: str, chunk_id: str) -> int:
    """Fusion's key for a chunk in every tier: its point id as an integer.

    An int, not the UUID: ``UUID.__hash__`` is Python code, and fusion hashes each of a
    request's 200 candidates several times.
    """
    return chunk_uuid(tenant, chunk_id).int


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


@dataclass(frozen=True, slots=True)
class LegScore:
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class Hit:
    """A fused result: the chunk, its fused score, and the rank and score it had in every leg."""

    chunk: StoredChunk
    score: float
    tier: TierName
    legs: Mapping[str, LegScore]

    @property
    def chunk_id(self) -> str:
        return self.chunk.chunk_id

    @property
    def doc_id(self) -> str:
        return self.chunk.doc_id
