"""The ONNX embedder's tokenizer, kept beside its graph: transformers' ids, masks and padding,
and a query-side load that imports neither transformers nor torch."""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from indexers.embed.embedder import DEFAULT_MODEL, packaged_model_path, resolve_model
from indexers.embed.onnx import _fingerprint, load_tokenizer
from indexers.embed.rust_tokenizer import RustTokenizer
from indexers.embed.tokens import Tokenizers, pad, untruncated, word_ids
from tests.unit.test_wordpiece import HOSTILE, shipped_texts

MAX_LEN = 256  # the ONNX embedder's input length


def varied_texts() -> list[str]:
    """A few hundred texts: the shipped collections (English and Chinese), hostile strings,
    empty ones, and long ones past the model's input length in both languages."""
    shipped = shipped_texts()
    chinese = [t for t in shipped if any("\u4e00" <= c <= "\u9fff" for c in t)]
    assert chinese, "the shipped collections hold Chinese text"
    long = [" ".join(shipped[:40]), "。".join(chinese) * 3, "word " * 600, "中" * 700]
    queries = ["", "员工手册第三条规定了什么？", "Can I be held in slavery?", "劳动合同法 第十条 Article 10"]
    return shipped + HOSTILE + long + queries + _random_texts(150)


def _random_texts(n: int) -> list[str]:
    """Seeded random mixes of ASCII words, CJK characters, accents, punctuation and odd spaces."""
    rng = random.Random(32)
    pieces = ["word", "Rights", "l'homme", "中", "华", "人民", "ü", "é", "ß", "İ", ",", "。", "？", "!", "-"]
    pieces += [" ", "  ", "\t", "\n", "\u3000", "\u00a0", "[SEP]", "[unused1]", "🙂", "123", "\x00"]
    return ["".join(rng.choices(pieces, k=rng.randint(1, 400))) for _ in range(n)]


def test_the_kept_tokenizer_gives_transformers_ids_masks_and_padding(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    model_dir = packaged_model_path()
    wrapper = AutoTokenizer.from_pretrained(str(model_dir))  # what the embedder loaded before
    first, first_pad = load_tokenizer(model_dir, tmp_path)  # built by transformers, kept
    assert len(list(tmp_path.glob("tokenizer-*.json"))) == 1
    kept, kept_pad = load_tokenizer(model_dir, tmp_path)  # read back by tokenizers alone
    assert isinstance(kept, RustTokenizer) and kept is not first
    assert kept_pad == first_pad == wrapper.pad_token_id
    texts = varied_texts()
    assert len(texts) > 300 and max(map(len, wrapper(texts)["input_ids"])) > MAX_LEN
    expected = wrapper(texts, truncation=True, max_length=MAX_LEN, padding=True, return_tensors="np")
    old_counter = untruncated(AutoTokenizer.from_pretrained(str(model_dir)))
    old = Tokenizers(wrapper, old_counter, MAX_LEN, words=word_ids(old_counter))
    for tokenizer, pad_id in ((first, first_pad), (kept, kept_pad)):
        counter = untruncated(copy.deepcopy(tokenizer))  # as OnnxEmbedder makes it
        for words in (word_ids(counter), None):  # by the word memo, and the tokenizer's own call
            new = Tokenizers(tokenizer, counter, MAX_LEN, words=words)
            ids = new.ids(texts)
            assert ids == old.ids(texts) == _unpadded(expected)
            feeds = pad(ids, pad_id)
            assert np.array_equal(feeds["input_ids"], expected["input_ids"])
            assert np.array_equal(feeds["attention_mask"], expected["attention_mask"])
            assert np.array_equal(feeds["token_type_ids"], expected["token_type_ids"])
            assert new.count(texts) == old.count(texts)


def _unpadded(padded: Any) -> list[list[int]]:
    """Each row of padded ids without its padding (where the attention mask is 0)."""
    pairs = zip(padded["input_ids"], padded["attention_mask"], strict=True)
    return [row[mask.astype(bool)].tolist() for row, mask in pairs]


def test_a_tokenizer_file_that_does_not_read_is_made_again(tmp_path: Path) -> None:
    model_dir = packaged_model_path()
    load_tokenizer(model_dir, tmp_path)
    (path,) = tmp_path.glob("tokenizer-*.json")
    path.write_text("{not json", encoding="utf-8")
    tokenizer, _ = load_tokenizer(model_dir, tmp_path)
    assert tokenizer(["Hello world"], truncation=True, max_length=8)["input_ids"] == [[101, 7592, 2088, 102]]
    assert json.loads(path.read_text(encoding="utf-8"))["cls_token_id"] == 101


def _tiny_graph(path: Path, dim: int = 384) -> None:
    """An ONNX graph with the exported encoder's inputs and output (``last_hidden_state``:
    batch × tokens × dim), so the test needs no export (PyTorch) to load an embedder."""
    names = ("input_ids", "attention_mask", "token_type_ids")
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"]) for n in names]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", dim])
    ones = helper.make_tensor("ones", TensorProto.FLOAT, [dim], [1.0] * dim)
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [2])
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["ids_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["ids_f", "axes"], ["ids_3d"]),
        helper.make_node("Mul", ["ids_3d", "ones"], ["last_hidden_state"]),
    ]
    graph = helper.make_graph(nodes, "tiny", inputs, [output], initializer=[ones, axes])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_a_query_embedder_loads_without_transformers_or_torch(tmp_path: Path) -> None:
    """Once the graph is exported and the tokenizer kept beside it (by the first load, here), a
    process that loads the embedder and embeds queries imports neither."""
    from indexers.embed.onnx import OnnxEmbedder

    model_dir = Path(resolve_model(DEFAULT_MODEL))
    _tiny_graph(tmp_path / f"{model_dir.name}-{_fingerprint(model_dir)}" / "model.onnx")
    OnnxEmbedder(DEFAULT_MODEL, cache_dir=tmp_path)
    code = (
        "import sys; from pathlib import Path; from indexers.embed.onnx import OnnxEmbedder; "
        f"e = OnnxEmbedder({DEFAULT_MODEL!r}, cache_dir=Path(sys.argv[1])).with_threads(1); "
        "v = e.embed_queries(['Can I be held in slavery?', '员工手册第三条规定了什么？']); "
        "print(v.shape, sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "(2, 384) []", out.stderr
