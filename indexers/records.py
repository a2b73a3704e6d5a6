"""The records of the storage layer: a document as it arrives, its chunks, a chunk as stored.

They are frozen dataclasses (the wire models live in ``rag_router.api.schemas``); the ids every
tier derives from a chunk (``chunk_uuid``, ``chunk_key``) are defined here once.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from indexers.language import text_language

TierName = Literal["hot", "cold"]
DEFAULT_TENANT = "default"

# Metadata keys that become exact-match (keyword) filters in every tier. Anything else in
# a document's metadata is stored and returned but cannot be filtered on: a filter on it
# is rejected instead of being silently ignored.
KEYWORD_FIELDS: frozenset[str] = frozenset(
    {"article", "section", "chapter", "amendment", "law", "version"}
    | {"source", "lang", "kind", "unit", "author"}
)
FILTERABLE_FIELDS: frozenset[str] = KEYWORD_FIELDS | {"year", "date", "tags", "doc_id"}
# The keyword term every chunk carries with its text's language (``indexers.language``), never
# from metadata: under an embedder that splits by language it names the model that embedded the
# chunk, and a query's dense leg searches only that model's vectors (``SearchQuery.space``).
SPACE_KEY = "text_lang"

Vector = npt.NDArray[np.float32]

# Set by ingestion on every chunk: the fingerprint of the whole document it came from (text,
# title, metadata, chunker settings). Not part of a chunk's own content hash: a chunk that did
# not change inside a changed document is neither re-embedded nor re-written.
DOC_HASH = "doc_hash"
SYSTEM_METADATA = frozenset({"char_start", DOC_HASH})  # not the user's: hidden from a document's metadata


MAX_ID_CHARS = 512
_CONTROL = frozenset(chr(c) for c in (*range(0x20), 0x7F))


def id_problem(doc_id: str) -> str | None:
    """Why ``doc_id`` cannot be a document's id, or None. One rule for every way in (the API's
    documents, files, JSONL records): an id is a URL path (``/v1/documents/{id}``) where "." and
    ".." segments would be resolved away, a command-line argument (no NUL) and a field of
    ``documents list``'s tab-separated lines, so a stored document can always be read and deleted."""
    if len(doc_id) > MAX_ID_CHARS:
        return f"id is {len(doc_id)} characters, over the {MAX_ID_CHARS} allowed"
    if any(part in (".", "..") for part in doc_id.split("/")):
        return 'id must not have "." or ".." as a path segment: it could not be fetched by URL'
    bad = next((ch for ch in doc_id if ch in _CONTROL), None)
    if bad is not None:
        return f"id must not contain control characters (it has {bad!r}): it could not be typed or listed"
    return None


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
        own = sorted((k, v) for k, v in self.metadata.items() if k != DOC_HASH)
        return content_hash(self.title or "", self.text, repr(own))

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
        terms.append(f"{SPACE_KEY}={text_language(self.embed_text)}")
        return terms


@dataclass(frozen=True, slots=True)
class EmbeddedChunk:
    chunk: Chunk
    vector: Vector


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
