"""Token ids memoised by word (``indexers.embed.wordpiece``) against the tokenizer itself."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.embed.tokens import Tokenizers, plain_ids
from indexers.embed.wordpiece import WordIds

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def tok(embedder: SentenceTransformerEmbedder) -> Tokenizers:
    tokenizers = embedder.tokenizers()
    assert tokenizers.words is not None  # all-MiniLM-L6-v2 is a lower-casing BERT WordPiece
    return tokenizers


def shipped_texts() -> list[str]:
    texts = []
    for path in sorted(DATA.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            texts += [str(record.get(k) or "") for k in ("title", "text")]
    return texts


def test_every_shipped_text_gets_the_tokenizers_ids(tok: Tokenizers) -> None:
    texts = shipped_texts()
    assert len(texts) > 100
    assert tok.words is not None
    assert tok.words.ids(texts) == plain_ids(tok.counter, texts)
    assert tok.words.ids(texts) == plain_ids(tok.counter, texts)  # from the memo this time
    assert tok.words.counts(texts) == [len(i) for i in plain_ids(tok.counter, texts)]


HOSTILE = [
    "a [SEP] b",  # an added token: matched before splitting
    "[MASK]ed and [unused1]",
    "x\x00y\x0bz\x0cw\x1fv\x7fu",  # controls the normaliser drops join the words either side
    "tab\tnew\nline\rreturn",
    "MiXeD CaSe, punct!? hello_world (x) {y} <z> ~`^|$+=",
    "a" * 150,  # longer than WordPiece reads: [UNK]
    "中\u0301国，人民 ünï-中文 Ωmega ΣΑΣ İstanbul straße",
    "\U00020000字 \U0002b820x \U0002b920y",  # CJK ranges, and the gap the normaliser leaves
    "x\u00a0y a\u200db co\u00adop \u3000z \x85w",  # other whitespace and format characters
    "第十二条 Article 12 « quoted » — dash 🙂",
    "",
    "   ",
]


def test_hostile_strings(tok: Tokenizers) -> None:
    assert tok.words is not None
    assert tok.words.ids(HOSTILE) == plain_ids(tok.counter, HOSTILE)


def test_cjk_boundaries(tok: Tokenizers) -> None:
    """Each code point around the normaliser's CJK ranges, between two words."""
    ranges = [(0x3400, 0x3500), (0x4DB0, 0x4E10), (0x9FF0, 0xA010), (0xF8F0, 0xFB10)]
    ranges += [(0x1FFF0, 0x20010), (0x2A6D0, 0x2A710), (0x2B810, 0x2B930), (0x2CEA0, 0x2CEC0)]
    ranges += [(0x2F7F0, 0x2F810), (0x2FA10, 0x2FA30)]
    texts = [f"ab{chr(c)}cd é{chr(c)}f" for lo, hi in ranges for c in range(lo, hi)]
    assert tok.words is not None
    assert tok.words.ids(texts) == plain_ids(tok.counter, texts)


ALPHABET = st.sampled_from(
    list("aZ09 .,-_'\t\n\r\x00\x0b\x85\u00a0\u200d\u0301é中文，Σß[]SEP<>İ\U0002b820\U00020000🙂")
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(ALPHABET, max_size=40), min_size=1, max_size=8))
def test_any_text(tok: Tokenizers, texts: list[str]) -> None:
    assert tok.words is not None
    assert tok.words.ids(texts) == plain_ids(tok.counter, texts)


def test_model_input_is_the_tokenizers(tok: Tokenizers) -> None:
    texts = [*shipped_texts()[:200], *HOSTILE]
    assert tok.ids(texts) == tok.tokenizer(texts, truncation=True, max_length=tok.max_len)["input_ids"]


def test_copies_in_one_process_share_the_memo_and_a_full_memo_starts_again(tok: Tokenizers) -> None:
    assert tok.words is not None
    words = WordIds(tok.words._encode, [], limit=50)
    texts = [f"w{i} x{i} y{i}" for i in range(100)]  # 300 distinct words, 3 a call
    for text in texts:
        assert words.ids([text]) == plain_ids(tok.counter, [text])
    assert 0 < len(words._memos.ids) <= 50
    copy = pickle.loads(pickle.dumps(words))
    assert copy._memos is words._memos
    fresh = WordIds(words._encode, [], limit=50)
    assert len(pickle.dumps(words)) == len(pickle.dumps(fresh))  # the memo stays here
