"""What both ingestion engines do to a document before embedding: fingerprint, compare, chunk.

A document's fingerprint (``document_hash``) covers its text, title, metadata, the tier it is
placed in and the chunker's settings, and is stored on each of its chunks (``DOC_HASH``). When
every chunk a tier holds for the document carries the same fingerprint, the document is
unchanged and is not even chunked: a re-run over an unchanged corpus reads, hashes and looks
up, nothing more. Otherwise the document is chunked and compared chunk by chunk: only chunks
whose content hash changed are embedded and written, and chunks it no longer has are stale.

The in-process pipeline (``indexers.ingest.pipeline``) and the Ray engine
(``indexers.ingest.ray.engine``) both call these, so they store the same thing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from indexers.records import DOC_HASH, Chunk, Document, TierName, content_hash
from indexers.text.chunk import Chunker
from indexers.text.structure import heading_metadata

# Bump when the chunker's output changes for the same settings. 2: a title-only document is one
# chunk, a Markdown "# heading" opens the first article's chunk, a code's title is its ``law``.
CHUNKER_VERSION = "2"
Status = Literal["created", "updated", "unchanged", "failed"]
# What a tier holds of one document: (tier, chunk id) → (content hash, document hash or None)
Stored = Mapping[tuple[TierName, str], tuple[str, str | None]]


def with_structure(doc: Document) -> Document:
    """Add article/section/chapter from the document's title when its metadata lacks them.

    Headings inside the text are the chunker's business (each chunk gets its section's).
    """
    found = heading_metadata(doc.title, "", doc.metadata)
    return dataclasses.replace(doc, metadata={**doc.metadata, **found}) if found else doc


def document_hash(doc: Document, tier: TierName, chunker: Chunker) -> str:
    settings = f"{chunker.max_tokens}/{chunker.overlap_tokens}/{CHUNKER_VERSION}"
    return content_hash(tier, doc.title or "", doc.text, repr(sorted(doc.metadata.items())), settings)


def unchanged(stored: Stored, tier: TierName, doc_hash: str) -> bool:
    """Every stored chunk of the document is in ``tier`` and carries ``doc_hash``."""
    return bool(stored) and all(t == tier and dh == doc_hash for (t, _), (_, dh) in stored.items())


def chunk_documents(chunker: Chunker, docs: Sequence[tuple[Document, str]]) -> list[list[Chunk]]:
    """Chunks per (document, its hash), each chunk stamped with the document's hash."""
    chunked = chunker.chunk_many([doc for doc, _ in docs])
    return [[_stamped(c, h) for c in chunks] for (_, h), chunks in zip(docs, chunked, strict=True)]


def chunk_documents_ids(
    chunker: Chunker, docs: Sequence[tuple[Document, str]]
) -> list[list[tuple[Chunk, list[int] | None]]]:
    """``chunk_documents``, each chunk with its text's token ids where the chunker knows them
    (``Chunker.chunk_many_ids``)."""
    chunked = chunker.chunk_many_ids([doc for doc, _ in docs])
    return [
        [(_stamped(c, h), ids) for c, ids in chunks] for (_, h), chunks in zip(docs, chunked, strict=True)
    ]


def _stamped(chunk: Chunk, doc_hash: str) -> Chunk:
    return dataclasses.replace(chunk, metadata={**chunk.metadata, DOC_HASH: doc_hash})


@dataclass(frozen=True, slots=True)
class Diff:
    status: Status
    fresh: list[Chunk]  # to embed and write
    stale: list[tuple[TierName, str]]  # (tier, chunk id) to delete once the fresh ones are durable


def diff(tier: TierName, chunks: Sequence[Chunk], stored: Stored) -> Diff:
    """Compare a document's new chunks with what the tiers hold of it."""
    if not stored:  # a new document (every one, into an empty tier): no hash to compare
        return Diff("created", list(chunks), [])
    fresh = [c for c in chunks if (stored.get((tier, c.chunk_id)) or ("",))[0] != c.content_hash]
    keep = {(tier, c.chunk_id) for c in chunks}
    gone = [key for key in stored if key not in keep]
    status: Status = "updated" if fresh or gone else "unchanged"
    return Diff(status, fresh, gone)
