"""A BERT encoder's forward pass in torch alone, for processes that only embed token ids.

An embedding actor that loads its model through transformers imports scikit-learn, SymPy and
torch's distributed and compiler packages with it: ``from transformers import AutoModel`` took
7–9 s on the GPU machine of docs/benchmarks.md, after torch's own 3–5 s, and the GPU waited
for it at the start of every bulk load. The encoder of a BERT model (MiniLM, BGE, E5, GTE:
what most embedding models are) is a few dozen lines of torch: embeddings, then layers of
self-attention and a feed-forward block, each closed by a residual LayerNorm. ``load`` builds
it from the model folder's ``config.json`` and ``model.safetensors`` for the configurations it
reproduces and returns None for any other; ``indexers.embed.passes`` admits it only after
comparing its vectors with the loaded model's own (``passes_loader``).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional

log = logging.getLogger(__name__)

# our parameter → the checkpoint's (BertModel's names; "bert." before them in a BertFor* one)
_EMBEDDINGS = {
    "word": "embeddings.word_embeddings",
    "position": "embeddings.position_embeddings",
    "token_type": "embeddings.token_type_embeddings",
    "norm": "embeddings.LayerNorm",
}
_LAYER = {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "attention_out": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "up": "intermediate.dense",
    "down": "output.dense",
    "norm": "output.LayerNorm",
}


def supported(config: Mapping[str, Any]) -> bool:
    """The configurations this module computes as transformers' ``BertModel`` does."""
    return (
        config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"  # the exact (erf) GELU
        and config.get("position_embedding_type", "absolute") == "absolute"
        and not config.get("is_decoder", False)
        and not config.get("add_cross_attention", False)
        and int(config["hidden_size"]) % int(config["num_attention_heads"]) == 0
    )


class _Layer(nn.Module):
    def __init__(self, size: int, heads: int, inner: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(size, size) for _ in range(3))
        self.attention_out = nn.Linear(size, size)
        self.attention_norm = nn.LayerNorm(size, eps=eps)
        self.up = nn.Linear(size, inner)
        self.down = nn.Linear(inner, size)
        self.norm = nn.LayerNorm(size, eps=eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        batch, length, size = x.shape
        split = (batch, length, self.heads, size // self.heads)
        q, k, v = (p(x).view(split).transpose(1, 2) for p in (self.query, self.key, self.value))
        scale = 1 / math.sqrt(size // self.heads)
        attended = functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        attended = attended.transpose(1, 2).reshape(batch, length, size)
        x = self.attention_norm(self.attention_out(attended) + x)
        out: torch.Tensor = self.norm(self.down(functional.gelu(self.up(x))) + x)
        return out


class BertEncoder(nn.Module):
    """Token ids and their attention mask → the last layer's token embeddings."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__()
        size, eps = int(config["hidden_size"]), float(config.get("layer_norm_eps", 1e-12))
        self.word = nn.Embedding(int(config["vocab_size"]), size)
        self.position = nn.Embedding(int(config["max_position_embeddings"]), size)
        self.token_type = nn.Embedding(int(config.get("type_vocab_size", 2)), size)
        self.norm = nn.LayerNorm(size, eps=eps)
        heads, inner = int(config["num_attention_heads"]), int(config["intermediate_size"])
        layers = int(config["num_hidden_layers"])
        self.layers = nn.ModuleList(_Layer(size, heads, inner, eps) for _ in range(layers))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        length = input_ids.shape[1]
        positions = torch.arange(length, device=input_ids.device)
        types = torch.zeros_like(input_ids)  # one segment, as BertModel without token types
        x = self.norm(self.word(input_ids) + self.token_type(types) + self.position(positions))
        # padding keys masked out (broadcast over heads and queries); none to mask: no mask
        keep = attention_mask.bool()
        mask = None if bool(keep.all()) else keep[:, None, None, :]
        for layer in self.layers:
            x = layer(x, mask)
        out: torch.Tensor = x
        return out


def load(folder: str | Path) -> BertEncoder | None:
    """The encoder of the BERT model in ``folder`` (float32, on the CPU), or None when its
    configuration or weights are not what this module reproduces."""
    folder = Path(folder)
    weights = folder / "model.safetensors"
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        # a config that leaves sizes to BertConfig's defaults goes through transformers
        if not weights.is_file() or not isinstance(config, dict) or not supported(config):
            return None
        return _load(weights, config)
    except Exception:  # unreadable, or shaped otherwise: transformers loads it (or says why not)
        log.debug("bert encoder: %s not loaded here", folder, exc_info=True)
        return None


def _load(weights: Path, config: Mapping[str, Any]) -> BertEncoder | None:
    from safetensors.torch import load_file

    stored = load_file(str(weights))
    prefix = "" if "embeddings.word_embeddings.weight" in stored else "bert."
    names = {f"{ours}.": f"{prefix}{theirs}." for ours, theirs in _EMBEDDINGS.items()}
    for i in range(int(config["num_hidden_layers"])):
        names |= {f"layers.{i}.{o}.": f"{prefix}encoder.layer.{i}.{t}." for o, t in _LAYER.items()}
    encoder = BertEncoder(config)
    state = {}
    for key in encoder.state_dict():
        ours, param = key.rsplit(".", 1)[0] + ".", key.rsplit(".", 1)[1]
        theirs = names[ours] + param
        if theirs not in stored:
            return None
        state[key] = stored[theirs].float()
    encoder.load_state_dict(state, strict=True)
    return encoder.eval()
