from __future__ import annotations

from itertools import pairwise

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.records import Document
from indexers.text.chunk import Chunker, rebuild, split_sentences


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
    assert "".join(c.text for c in chunker.chunk(Document(id="w", text=words))) == words  # no overlap


def test_chunks_follow_the_structure_and_never_straddle_an_article(
    embedder: SentenceTransformerEmbedder,
) -> None:
    body = " ".join(f"The controller shall comply with duty {i}." for i in range(8))
    text = (
        "Preamble of the regulation.\n\nCHAPTER III\nRights of the data subject\n\n"
        f"Article 12\nTransparent information. {body}\n\n"
        f"Section 2. {body}\n"
        "Article 5 of the treaty is prose, not a heading.\n"
        f"Article 13 – Information to be provided\n{body}\n\n"
        f"第三章 总则\n第十七条 公民享有受教育的权利。{body}"
    )
    chunks = Chunker(embedder.count_tokens, max_tokens=48, overlap_tokens=8).chunk(Document("law", text))
    where = [
        (c.metadata.get("chapter"), c.metadata.get("article"), c.metadata.get("section")) for c in chunks
    ]
    assert where[0] == (None, None, None) and chunks[0].text.rstrip() == "Preamble of the regulation."
    assert set(where) == {
        (None, None, None),
        ("III", 12, None),
        ("III", 12, 2),
        ("III", 13, None),
        (3, 17, None),
    }
    # every chunk holds text of one article only, and the chapter title stays with Article 12
    for chunk, (_, article, _) in zip(chunks, where, strict=True):
        assert not ("Article 13" in chunk.text and article != 13)
        assert not ("第十七条" in chunk.text and article != 17)
    assert chunks[1].text.startswith("CHAPTER III") and "Article 12" in chunks[1].text
    assert any("Article 5 of the treaty" in c.text for c in chunks if c.metadata.get("section") == 2)
    assert [c.chunk_id for c in chunks] == [f"law#{n}" for n in range(len(chunks))]


def test_chinese_sentences_are_joined_byte_for_byte(embedder: SentenceTransformerEmbedder) -> None:
    """No space is put after 。 and line breaks stay: a chunk is a slice of the stored text."""
    text = "在道路上驾驶机动车，有下列情形之一的，处拘役，并处罚金：\n（一）追逐竞驶，情节恶劣的；"
    text += "\n（二）醉酒驾驶机动车的。"
    text += "机动车所有人、管理人对前款行为负有直接责任的，依照前款的规定处罚。" * 3
    [chunk] = Chunker(embedder.count_tokens, max_tokens=500).chunk(Document(id="xf-133-1", text=text))
    assert chunk.text == text


def test_every_chunk_is_a_slice_of_any_unicode_text(embedder: SentenceTransformerEmbedder) -> None:
    """Seeded random texts mixing scripts, emoji, combining marks, odd spaces and sentence ends."""
    import random

    rng = random.Random(20261130)
    alphabet = [
        *"abc xyz 数据保护。！？；.!?\n\n\t\u3000 é\u0301 😀 ﬁ Ωω ١٢٣ \u200b「」“”",
        "Article 5 ",
        "第十条 ",
    ]
    chunker = Chunker(embedder.count_tokens, max_tokens=24, overlap_tokens=6)
    for i in range(40):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 400)))
        doc = Document(id=f"r{i}", text=text)
        chunks = chunker.chunk(doc)
        # every chunk is a slice that starts at a sentence (or at the text's start)
        assert all(c.text.strip() and c.text in text for c in chunks)
        assert all(c.text == c.text.lstrip() for c in chunks[1:])
        # the chunks give the document back, byte for byte, whitespace around it included
        if text.strip():
            assert rebuild([(c.text, c.metadata["char_start"]) for c in chunks]) == text
        # together the chunks hold every visible character, in order
        seen = "".join(
            c.text for c in Chunker(embedder.count_tokens, max_tokens=24, overlap_tokens=0).chunk(doc)
        )
        assert [ch for ch in seen if not ch.isspace()] == [ch for ch in text if not ch.isspace()]


def test_markdown_headings_stay_with_their_section(embedder: SentenceTransformerEmbedder) -> None:
    """'## Section 1 Equipment' used to leave a chunk of only '##' and a trailing ' ##' before it."""
    text = (
        "# Manual\n\nIntro text here.\n\n## Section 1 Equipment\n\nThe kit has a pump and a hose.\n\n"
        "## Section 2 Use\n\nUse it daily.\n\n**Article 5** Bold headings count too."
    )
    chunks = Chunker(embedder.count_tokens, max_tokens=200).chunk(Document(id="m", text=text))
    assert [c.text.rstrip() for c in chunks] == [
        "# Manual\n\nIntro text here.",
        "## Section 1 Equipment\n\nThe kit has a pump and a hose.",
        "## Section 2 Use\n\nUse it daily.",
        "**Article 5** Bold headings count too.",
    ]
    assert [c.metadata.get("section") for c in chunks[1:3]] == [1, 2] and chunks[3].metadata["article"] == 5


def test_a_code_titled_by_its_heading_names_its_articles(embedder: SentenceTransformerEmbedder) -> None:
    """ "# 员工手册" opens the first article's chunk (no chunk of a heading alone), and the title
    names the code: each article's chunk carries law 员工手册, as "刑法 第二十条" titles do."""
    text = "# 员工手册\n\n第一条 员工应当守时。\n第二条 员工应当诚信。\n"
    chunker = Chunker(embedder.count_tokens, max_tokens=64, overlap_tokens=0)
    chunks = chunker.chunk(Document(id="h", text=text, title="员工手册"))
    assert [(c.text, c.metadata.get("article"), c.metadata.get("law")) for c in chunks] == [
        ("# 员工手册\n\n第一条 员工应当守时。\n", 1, "员工手册"),
        ("第二条 员工应当诚信。\n", 2, "员工手册"),
    ]
    # a title that is no name ("刑法 第二十条" is read as a heading), metadata that has a law, or
    # a text without articles: no law from the title
    for title, metadata, body in (
        ("刑法 第二十条", {}, text),
        ("员工手册", {"law": "规章"}, text),
        ("员工手册", {}, "员工应当守时。"),
    ):
        found = chunker.chunk(Document(id="x", text=body, title=title, metadata=metadata))
        assert {c.metadata.get("law") for c in found} <= {None, "规章", "刑法"}
