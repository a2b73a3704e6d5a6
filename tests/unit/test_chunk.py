from __future__ import annotations

from itertools import pairwise

from indexers.chunk import Chunker, split_sentences
from indexers.documents import Document
from indexers.embed import SentenceTransformerEmbedder


def test_split_sentences_english_and_cjk() -> None:
    text = "First one. Second one! Third? 第一句。第二句！第三句？\nA new line"
    assert split_sentences(text) == [
        "First one.",
        "Second one!",
        "Third?",
        "第一句。",
        "第二句！",
        "第三句？",
        "A new line",
    ]


def test_chunks_are_token_bounded_deterministic_and_cover_the_text(
    embedder: SentenceTransformerEmbedder,
) -> None:
    sentences = [f"Sentence number {i} talks about protein folding and enzyme kinetics." for i in range(60)]
    doc = Document(id="d1", text=" ".join(sentences), title="T")
    chunker = Chunker(embedder.count_tokens, max_tokens=64, overlap_tokens=16)
    chunks = chunker.chunk(doc)
    assert len(chunks) > 5
    assert [c.chunk_id for c in chunks] == [f"d1#{n}" for n in range(len(chunks))]
    assert chunks == chunker.chunk(doc)
    assert max(embedder.count_tokens([c.text for c in chunks])) <= 64
    # sentence-aware: every chunk starts and ends on a sentence boundary
    assert all(c.text.startswith("Sentence") and c.text.endswith(".") for c in chunks)
    covered = {s for c in chunks for s in split_sentences(c.text)}
    assert covered == set(sentences)


def test_overlap_repeats_the_tail_of_the_previous_chunk(embedder: SentenceTransformerEmbedder) -> None:
    text = " ".join(f"Short sentence {i}." for i in range(40))
    chunks = Chunker(embedder.count_tokens, max_tokens=40, overlap_tokens=12).chunk(
        Document(id="x", text=text)
    )
    for prev, nxt in pairwise(chunks):
        before, after = split_sentences(prev.text), split_sentences(nxt.text)
        shared = [s for s in after if s in before]
        assert shared and shared == before[-len(shared) :] == after[: len(shared)]
        assert sum(embedder.count_tokens(shared)) <= 12


def test_a_sentence_longer_than_a_chunk_is_split(embedder: SentenceTransformerEmbedder) -> None:
    words = " ".join(f"word{i}" for i in range(400))
    cjk = "数据保护" * 200 + "。"
    chunker = Chunker(embedder.count_tokens, max_tokens=50, overlap_tokens=0)
    for text in (words, cjk):
        chunks = chunker.chunk(Document(id="long", text=text))
        assert len(chunks) > 3
        assert max(embedder.count_tokens([c.text for c in chunks])) <= 50
    assert " ".join(c.text for c in chunker.chunk(Document(id="w", text=words))) == words
