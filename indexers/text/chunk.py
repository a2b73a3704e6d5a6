"""Document → Chunks: structure-aware, token-bounded, sentence-aware (English and CJK), with overlap.

The text is first cut at heading lines (``indexers.structure.split_sections``): each section
is packed on its own, so no chunk straddles an article, and its chunks carry the section's
article / section / chapter. Token counts come from the embedder's own tokenizer, so a chunk
never exceeds what the model reads. Paged sources (PDF) give each chunk the ``page`` it
starts on. Ids are deterministic, ``{doc_id}#{n}``: re-chunking the same text gives the same
ids, so a re-ingest overwrites instead of duplicating. A chunk's text is a slice of the
document's, from its first sentence's start to where the next chunk starts (or its last
sentence's end): nothing is inserted or normalised ("。" is not followed by a space, line breaks
stay), and ``rebuild`` puts the document back together from its chunks and their ``char_start``.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from indexers.records import Chunk, Document
from indexers.text.structure import Section, split_sections

TokenCounter = Callable[[Sequence[str]], list[int]]
TokenIds = Callable[[Sequence[str]], list[list[int]]]

# A sentence ends at . ! ? (plus closing quotes/brackets) before whitespace, at CJK 。！？,
# or at a blank line. A single line break is not an end: PDF and e-mail text is hard-wrapped
# mid-sentence. Abbreviations like "e.g. the" may split early; that only costs a
# slightly shorter chunk, never lost text.
_SENTENCE_END = re.compile(r"(?<=[.!?])([\"'”’)\]]*)\s+|(?<=[。！？；])|\n\s*\n")


def split_sentences(text: str) -> list[str]:
    return [s for _, s in sentence_spans(text)]


def sentence_spans(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) pairs; sentences are stripped, offsets point at their first character."""
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        end = m.end(1) if m.group(1) else m.start()  # closing quotes stay with their sentence
        spans.append((start, text[start:end]))
        start = m.end()
    spans.append((start, text[start:]))
    out = []
    for offset, raw in spans:
        stripped = raw.strip()
        if stripped:
            out.append((offset + len(raw) - len(raw.lstrip()), stripped))
    return out


RERANK_SENTENCES = 16  # a chunk's sentences a reranker scores it by
RERANK_CHARS = 1000  # of each


def rerank_sentences(text: str) -> list[str]:
    """The sentences a chunk is reranked by (``rag_router.search.rerank``), which ingest embeds
    ahead of the first query: the first ``RERANK_SENTENCES`` of at least two characters, each cut
    to ``RERANK_CHARS``. One function for both, so that the vectors stored are the ones asked for."""
    out = [s[:RERANK_CHARS] for s in split_sentences(text) if len(s) >= 2]
    return list(dict.fromkeys(out))[:RERANK_SENTENCES]


# start and end offset in the document, tokens, and their ids where known (a whole sentence's)
Piece = tuple[int, int, int, list[int] | None]
Placed = tuple[int, int, dict[str, Any], list[int] | None]  # a chunk: start, end, metadata, ids


@dataclass(frozen=True, slots=True)
class Chunker:
    """Packs whole sentences into chunks of at most ``max_tokens`` tokens.

    ``overlap_tokens`` of trailing sentences are repeated at the start of the next chunk so
    that a fact spanning a boundary is retrievable from either side.
    """

    count_tokens: TokenCounter
    max_tokens: int = 240
    overlap_tokens: int = 32
    # The same tokenizer's ids (no special tokens), where it splits words at whitespace and
    # punctuation as BERT's WordPiece does: ``chunk_many_ids`` then gives each chunk's text its ids.
    token_ids: TokenIds | None = None

    def chunk(self, doc: Document) -> list[Chunk]:
        return self.chunk_many([doc])[0]

    def chunk_many(self, docs: Sequence[Document]) -> list[list[Chunk]]:
        """Chunks per document; the sentences of all documents are counted in one tokenizer call."""
        return [[c for c, _ in chunks] for chunks in self._chunk(docs, with_ids=False)]

    def chunk_many_ids(self, docs: Sequence[Document]) -> list[list[tuple[Chunk, list[int] | None]]]:
        """``chunk_many``, each chunk with its text's token ids (``token_ids``: its sentences' ids
        joined, no tokenizing again), or None where they are not known: no ``token_ids``, or a
        sentence longer than a chunk cut inside it. A chunk's text is its sentences and the
        whitespace between them, and sentences end at whitespace or at punctuation (。too),
        where the tokenizer splits words anyway, so the joined ids are the text's own
        (tests/unit/test_chunk_ids.py compares them on every shipped collection)."""
        return self._chunk(docs, with_ids=self.token_ids is not None)

    def _chunk(self, docs: Sequence[Document], with_ids: bool) -> list[list[tuple[Chunk, list[int] | None]]]:
        parts = [
            (doc, section, sentence_spans(section.text))
            for doc in docs
            for section in _by_page(split_sections(doc.text, doc.metadata, doc.title), doc.page_starts)
        ]
        sentences = [s for _, _, spans in parts for _, s in spans]
        ids: Iterator[list[int] | None]
        if with_ids and self.token_ids is not None:
            known = self.token_ids(sentences)
            counts, ids = iter([len(i) for i in known]), iter(known)
        else:
            counts, ids = iter(self.count_tokens(sentences)), itertools.repeat(None)
        spans_of: dict[int, list[Placed]] = {id(doc): [] for doc in docs}
        for doc, section, spans in parts:
            found = [(next(counts), next(ids)) for _ in spans]
            pieces = list(self._pieces(spans, found, section.start))
            for packed in self._pack(pieces):
                offset = packed[0][0]
                metadata: dict[str, Any] = {**section.metadata, "char_start": offset}
                if doc.page_starts:
                    metadata["page"] = bisect.bisect_right(doc.page_starts, offset)
                joined = None
                if with_ids and all(p[3] is not None for p in packed):
                    joined = list(itertools.chain.from_iterable(p[3] or () for p in packed))
                spans_of[id(doc)].append((offset, packed[-1][1], metadata, joined))
        out: dict[int, list[tuple[Chunk, list[int] | None]]] = {}
        for doc in docs:
            placed = spans_of[id(doc)] or _title_only(doc, with_ids)
            if placed:  # the first chunk starts at the text's start: leading whitespace is kept
                first = placed[0]
                placed[0] = (0, first[1], {**first[2], "char_start": 0}, first[3])
            # A chunk runs on to where the next one starts (the last one to the text's end), so the
            # whitespace between and around chunks is kept and the chunks rebuild the stored text
            # exactly (``rebuild``); overlapping chunks keep their own end.
            ends = [
                max(p[1], placed[i + 1][0]) if i + 1 < len(placed) else len(doc.text)
                for i, p in enumerate(placed)
            ]
            out[id(doc)] = [
                (
                    Chunk(
                        chunk_id=f"{doc.id}#{n}",
                        doc_id=doc.id,
                        n=n,
                        text=doc.text[offset:stop],
                        title=doc.title,
                        metadata=metadata,
                        tenant=doc.tenant,
                    ),
                    joined,
                )
                for n, ((offset, _, metadata, joined), stop) in enumerate(zip(placed, ends, strict=True))
            ]
        return [out[id(doc)] for doc in docs]

    def _pieces(
        self, spans: list[tuple[int, str]], found: list[tuple[int, list[int] | None]], base: int
    ) -> Iterator[Piece]:
        for (offset, sentence), (tokens, ids) in zip(spans, found, strict=True):
            start = base + offset
            if tokens <= self.max_tokens:
                yield start, start + len(sentence), tokens, ids
            else:  # cut inside the sentence (even inside a word): its pieces' ids are not known
                yield from ((start + a, start + b, t, None) for a, b, t in self._split_long(sentence))

    def _split_long(self, sentence: str) -> Iterator[tuple[int, int, int]]:
        """A sentence longer than a chunk is cut at word (or, for CJK, character) boundaries."""
        units = [m.span() for m in re.finditer(r"\S+", sentence)]
        if len(units) <= 1:
            units = [(i, i + 1) for i in range(len(sentence))]
        counts = self.count_tokens([sentence[a:b] for a, b in units])
        start, used = 0, 0
        for i, count in enumerate(counts):
            if used + count > self.max_tokens and i > start:
                yield units[start][0], units[i - 1][1], used
                start, used = i, 0
            used += count
        if start < len(units):
            yield units[start][0], units[-1][1], used

    def _pack(self, pieces: list[Piece]) -> Iterator[list[Piece]]:
        """The pieces of each chunk: it runs from its first piece's start to its last's end."""
        current: list[Piece] = []
        used = 0
        for piece in pieces:
            if current and used + piece[2] > self.max_tokens:
                yield current
                current, used = self._overlap(current)
                if used + piece[2] > self.max_tokens:
                    current, used = [], 0
            current.append(piece)
            used += piece[2]
        if current:
            yield current

    def _overlap(self, chunk: list[Piece]) -> tuple[list[Piece], int]:
        kept: list[Piece] = []
        used = 0
        for piece in reversed(chunk[1:]):  # never repeat a whole chunk
            if used + piece[2] > self.overlap_tokens:
                break
            kept.insert(0, piece)
            used += piece[2]
        return kept, used


def _by_page(sections: Iterable[Section], page_starts: Sequence[int]) -> Iterator[Section]:
    """Each section cut where a page starts (a PDF's): a chunk is on one page, the one its
    ``page`` says, so a quote from page 2 is never cited as page 1."""
    for section in sections:
        end = section.start + len(section.text)
        cuts = [c for c in page_starts if section.start < c < end]
        if not cuts:
            yield section
            continue
        bounds = [section.start, *cuts, end]
        for a, b in itertools.pairwise(bounds):
            piece = section.text[a - section.start : b - section.start]
            if piece.strip():
                yield Section(a, piece, section.metadata)


def _title_only(doc: Document, with_ids: bool) -> list[Placed]:
    """A document with a title and no text (half of a classic test collection's records) is one
    chunk of its empty text: ``Chunk.embed_text`` is then the title alone, so the title is
    embedded and indexed, while the chunk's text stays the document's own (nothing invented:
    ``rebuild`` and ``documents get`` still give the empty text). Its text has no token ids."""
    if not (doc.title and doc.title.strip()):
        return []
    return [(0, len(doc.text), {**doc.metadata, "char_start": 0}, [] if with_ids else None)]


def rebuild(chunks: Sequence[tuple[str, Any]]) -> str | None:
    """The document's text from its chunks in order, as (text, char_start) pairs: each chunk up to
    where the next one starts. None when a chunk has no ``char_start`` (stored by an older version)."""
    if not chunks or any(not isinstance(start, int) for _, start in chunks):
        return None
    parts = [text[: nxt - start] for (text, start), (_, nxt) in itertools.pairwise(chunks)]
    return "".join(parts) + chunks[-1][0]
