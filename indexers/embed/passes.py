"""A sentence-transformers model's passes without sentence-transformers: the transformer, then
its pooling and normalisation, for processes that only turn token ids into vectors (the Ray
engine's embedding actors).

Importing sentence-transformers took 7.4–8.8 s on the GPU machine of docs/benchmarks.md (it
pulls in scikit-learn and SciPy; torch itself 3.1–4.5 s, CUDA 0.4 s, the weights 0.5 s), and
every embedding actor paid it before its first batch: the GPU idle for that long. The passes
here load the weights with transformers alone. They are offered (``passes_loader``) only for the
layouts they reproduce (a Transformer, mean or CLS pooling, an optional Normalize) and only when,
loaded as an actor will load them, they give the loaded model's own vectors on sample texts
(within 1e-6 in float32; in half precision within two steps of it, since sentence-transformers'
versions pool half-precision tokens differently); any other model keeps loading through
sentence-transformers.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from indexers.embed.base import PassEmbedder, attention_without_cudnn, resolve_device
from indexers.embed.tokens import Tokenizers, tensors
from indexers.records import Vector

log = logging.getLogger(__name__)

Pooling = Literal["mean", "cls"]
_SAMPLES = (
    "a",
    "The tide tables for the harbour are published every spring.",
    "数据控制者应当采取适当措施。" * 3,
    "Ünïcödé, numbers 12.5 % and [brackets] " * 80,  # past the model's length: truncated
)


@dataclass(frozen=True, slots=True)
class Recipe:
    """What an embedding process needs to load the transformer and pool as the model does."""

    path: str  # the transformer's folder (config and weights)
    pooling: Pooling
    normalize: bool
    dim: int
    max_len: int
    pad_id: int
    dtype: str  # the weights' dtype as loaded on a CPU ("float32"); halved on a GPU
    max_batch: int
    max_batch_tokens: int
    device: str = "auto"  # as the embedder was configured ("auto": a GPU where there is one)


def passes_loader(embedder: PassEmbedder, model: Any, name: str) -> Callable[[], PassEmbedder] | None:
    """``embedder``'s passes loaded without sentence-transformers (``model``: its loaded
    ``SentenceTransformer``), or None when this module cannot reproduce them. The check loads
    the passes as an actor will (the folder, transformers' defaults: what sentence-transformers
    loaded with other arguments, a subfolder or another class fails it) and compares their
    vectors with the model's own on sample texts."""
    recipe = _recipe(embedder, model)
    if recipe is None:
        return None
    import torch

    rows = embedder.tokenizers().ids(list(_SAMPLES))
    expected = embedder._forward(rows)  # one padded batch, as the passes' below
    device = str(embedder.device)  # type: ignore[attr-defined]
    got = TransformerPasses(recipe, device=device)._forward(rows)
    dtype = next(model[0].auto_model.parameters()).dtype
    # half precision: sentence-transformers versions pool fp16 tokens in different orders (6.0
    # and 6.2 differ by one fp16 step, 1.2e-4); a wrong pooling or model differs by tenths
    tolerance = 1e-6 if dtype == torch.float32 else 2 * torch.finfo(dtype).eps
    if got.shape != expected.shape or float(np.max(np.abs(got - expected))) > tolerance:
        log.info("embedder %s: passes differ from the model's own; actors load sentence-transformers", name)
        return None
    return functools.partial(TransformerPasses, recipe)


def _recipe(embedder: PassEmbedder, model: Any) -> Recipe | None:
    modules = list(model._modules.values())
    kinds = [type(m).__name__ for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    mode = getattr(modules[1], "pooling_mode", None)  # sentence-transformers ≥ 6: a name
    if not isinstance(mode, str) and hasattr(modules[1], "get_pooling_mode_str"):
        mode = modules[1].get_pooling_mode_str()  # before 6: flags, and this
    auto = getattr(modules[0], "auto_model", None)
    if mode not in ("mean", "cls") or auto is None or not getattr(auto, "name_or_path", ""):
        return None
    device = str(embedder.device)  # type: ignore[attr-defined]
    loaded = str(next(auto.parameters()).dtype).removeprefix("torch.")
    dtype = "float32" if device.startswith("cuda") else loaded
    tokenizers: Tokenizers = embedder.tokenizers()
    return Recipe(
        path=str(auto.name_or_path),
        pooling=mode,
        normalize=kinds[-1] == "Normalize",
        dim=embedder.dim,
        max_len=tokenizers.max_len,
        pad_id=int(embedder._pad_id),  # type: ignore[attr-defined]
        dtype=dtype,
        max_batch=embedder._max_batch,
        max_batch_tokens=embedder._max_batch_tokens,
        device=str(getattr(embedder, "configured_device", "auto")),
    )


def pooled(tokens: Any, mask: Any, pooling: Pooling, normalize: bool) -> Any:
    """Token embeddings → one vector a row, as sentence-transformers' Pooling and Normalize do
    (a mean in float32 for half-precision tokens, back in their dtype)."""
    import torch

    if pooling == "cls":
        out = tokens[:, 0]  # right padding: the first token is every row's CLS
    else:
        acc = torch.float32 if tokens.dtype in (torch.float16, torch.bfloat16) else tokens.dtype
        weights = mask.unsqueeze(-1).to(tokens.dtype)
        total = (tokens * weights).sum(dim=1, dtype=acc)
        count = torch.clamp(weights.sum(dim=1, dtype=acc), min=1e-9)
        out = (total / count).to(tokens.dtype)
    return torch.nn.functional.normalize(out, p=2, dim=-1) if normalize else out


class TransformerPasses(PassEmbedder):
    """Token ids → vectors with the transformer alone (``Recipe``); fp16 on a GPU. It has no
    tokenizer: whoever sends the ids tokenized them (``Tokenizers``)."""

    def __init__(self, recipe: Recipe, device: str | None = None) -> None:
        """``device``: where to run (the check's); by default the recipe's, resolved here (an
        actor's GPU when it was given one)."""
        import torch

        from indexers.embed import bert

        self.device = device or resolve_device(recipe.device)
        attention_without_cudnn(self.device)
        # a BERT encoder without transformers' imports (indexers.embed.bert); any other through it
        model: Any = bert.load(recipe.path)
        self.transformers = model is None
        if model is None:
            model = _auto_model(recipe.path)
        model = model.to(getattr(torch, recipe.dtype))
        model.eval()
        self._model = model.to(self.device)
        if self.device.startswith("cuda"):
            self._model.half()
        self._recipe = recipe
        self._dim = recipe.dim
        self._pad_id = recipe.pad_id
        self._max_len = recipe.max_len
        self._max_batch = recipe.max_batch
        self._max_batch_tokens = recipe.max_batch_tokens

    def tokenizers(self) -> Tokenizers:
        raise NotImplementedError("TransformerPasses embeds token ids only (embed_ids)")

    def _forward(self, rows: Sequence[Sequence[int]]) -> Vector:
        import torch

        r = self._recipe
        with torch.inference_mode():
            x = tensors(rows, r.pad_id, self.device, r.max_len)
            if self.transformers:
                tokens = self._model(**x).last_hidden_state
            else:
                tokens = self._model(x["input_ids"], x["attention_mask"])
            vectors = pooled(tokens, x["attention_mask"], r.pooling, r.normalize)
        return np.asarray(vectors.float().cpu().numpy())


def _auto_model(path: str) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers reads it: no downloads
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    transformers_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    return AutoModel.from_pretrained(path)
