"""Each chunk's token ids joined from its sentences' (``Chunker.chunk_many_ids``,
``Tokenizers.chunk_passages``: what the Ray engine's prepare tasks do) against tokenizing each
chunk's ``embed_text`` again (``Tokenizers.passages``: what they did before)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.embed.tokens import Tokenizers
from indexers.ingest.load import load_paths
from indexers.records import Document
from indexers.text.chunk import Chunker

DATA = Path(__file__).resolve().parents[2] / "data"
HOSTILE = [
    "a [SEP] b",
    "x\x00y\x0bz\x0cw\x1fv\x7fu",
    "tab\tnew\nline\rreturn",
    "中\u0301国，人民 ünï-中文 Ωmega ΣΑΣ İstanbul straße",
    "\U00020000字 \U0002b820x \U0002b920y",
    "x\u00a0y a\u200db co\u00adop \u3000z \x85w",
    "第十二条 Article 12 « quoted » — dash 🙂",
]


@pytest.fixture(scope="module")
def tok(embedder: SentenceTransformerEmbedder) -> Tokenizers:
    tokenizers = embedder.tokenizers()
    assert tokenizers.words is not None
    return tokenizers


def documents() -> list[Document]:
    shipped = [d for d in load_paths([DATA]) if isinstance(d, Document)]
    assert len(shipped) > 50
    made = [
        # sentence ends of every kind, with the hostile strings around them
        Document(
            id=f"h{i}", text=f"{h}. {h}!\u201d {h}? 第一句。第二句{h}；{h}\n\n{h}\x1f.\x1fNo {h}", title=t
        )
        for i, h in enumerate(HOSTILE)
        for t in (None, f"Title {i}")
    ]
    made += [
        Document(id="url", text="see " + "a1/" * 300 + " and more. Done."),  # one word past a chunk
        Document(id="spaced", text=" ".join(["word"] * 700) + ". Next sentence."),  # cut at spaces
        Document(id="cjk", text="数据控制者应当采取适当措施" * 60 + "。后一句。"),  # cut at characters
        Document(id="heads", text="Preamble.\n\n## Article 12\nFirst. Second.\n\n第十三条 数据。下一句。"),
        Document(id="titled", text="Body. More body.", title="Title [SEP] x\x00y 中文"),
        Document(id="blank", text="  \n  Leading space. Then text.  \n"),
    ]
    return shipped + made


# "query:" and "p\x1f" (Python calls it whitespace, BERT's normaliser drops it) join the text
@pytest.mark.parametrize("prefix", ["", "passage: ", "query:", "p\x1f"])
@pytest.mark.parametrize("sizes", [(240, 0), (64, 16), (12, 4)])
def test_joined_ids_are_the_tokenizers_own(tok: Tokenizers, prefix: str, sizes: tuple[int, int]) -> None:
    tokenizers = dataclasses.replace(tok, passage_prefix=prefix)
    assert tokenizers.words is not None
    chunker = Chunker(tokenizers.count, *sizes, token_ids=tokenizers.words.ids)
    docs = documents()
    with_ids = chunker.chunk_many_ids(docs)
    # the same chunks as without ids
    assert [[c for c, _ in chunks] for chunks in with_ids] == chunker.chunk_many(docs)
    chunks = [c for doc_chunks in with_ids for c, _ in doc_chunks]
    ids = [i for doc_chunks in with_ids for _, i in doc_chunks]
    assert tokenizers.chunk_passages(chunks, ids) == tokenizers.passages([c.embed_text for c in chunks])
    # at 240 tokens most chunks' ids are joined (smaller, most sentences are cut: tokenized again)
    assert sum(i is not None for i in ids) > (0.9 if sizes[0] == 240 else 0.1) * len(ids)
    unknown = {c.doc_id for c, i in zip(chunks, ids, strict=True) if i is None}
    assert {"url", "spaced", "cjk"} <= unknown


def test_without_token_ids_no_ids_are_known(tok: Tokenizers) -> None:
    chunker = Chunker(tok.count, 64, 16)
    chunks = [pair for doc in chunker.chunk_many_ids(documents()[:20]) for pair in doc]
    assert chunks and all(ids is None for _, ids in chunks)
    assert tok.chunk_passages([c for c, _ in chunks], [None] * len(chunks)) == tok.passages(
        [c.embed_text for c, _ in chunks]
    )


_ENDS = [". ", "! ", "?\u201d ", "。", "；", "\n\n", "\n", " ", "\x1f", "\x00"]  # sentence ends, controls
_WORDS = ["word", "Two words", "e.g.", "中文", "[SEP]", "ünï", "\u0301", "🙂", "12.5", "x" * 30]
PIECES = st.sampled_from([*_ENDS, *_WORDS, "## Article 3\n", "第五条 "])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(PIECES, max_size=60).map("".join), min_size=1, max_size=4), st.booleans())
def test_any_text(tok: Tokenizers, texts: list[str], titled: bool) -> None:
    assert tok.words is not None
    chunker = Chunker(tok.count, 16, 4, token_ids=tok.words.ids)
    docs = [Document(id=f"d{i}", text=t, title="A title" if titled else None) for i, t in enumerate(texts)]
    pairs = [pair for doc in chunker.chunk_many_ids(docs) for pair in doc]
    chunks = [c for c, _ in pairs]
    assert tok.chunk_passages(chunks, [i for _, i in pairs]) == tok.passages([c.embed_text for c in chunks])


def test_no_word_memo_for_a_tokenizer_that_keeps_control_characters(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """Sentences are split and stripped at what Python calls whitespace (\x1c-\x1f too); a BERT
    normaliser without ``clean_text`` keeps those inside words, so neither the memo by word nor
    the joined ids would be its ids: such a tokenizer gets neither."""
    import copy

    from tokenizers.normalizers import BertNormalizer

    from indexers.embed.tokens import word_ids

    counter = copy.deepcopy(embedder.tokenizers().counter)
    assert word_ids(counter) is not None
    counter.backend_tokenizer.normalizer = BertNormalizer(clean_text=False, lowercase=True)
    assert word_ids(counter) is None
