"""The torch embedder of a model whose passes were checked once: a start without
sentence-transformers.

Importing sentence-transformers took 9.2–10.7 s of `serve`'s 19 s start on the 10M store of
docs/benchmarks.md (it pulls in transformers, scikit-learn and SciPy); torch itself 2.8–5.8 s,
the weights 0.25 s. The Ray engine's actors already embed without it (``passes.py``: the
transformer, its pooling and normalisation, admitted only when they give the loaded model's
own vectors). This module keeps that verdict: the first start on a machine loads the model
through sentence-transformers, checks the passes and a tokenizer read back from JSON against
it on sample texts (the same ids, the same vectors within the passes' tolerance), and writes
the recipe beside the tokenizer under ``cache_dir``. Later starts read both and import neither
sentence-transformers nor transformers (for a BERT model: ``bert.py``).

The folder is keyed by the model's files (read whole) and by the versions of torch,
transformers and sentence-transformers, the file by the device kind: a changed model, an
upgrade, or a first start on a GPU checks again. A model the passes do not reproduce is
recorded as such, and keeps loading through sentence-transformers without a check each start.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from indexers.embed.base import PassEmbedder, resolve_device
from indexers.embed.embedder import SentenceTransformerEmbedder, resolve_model
from indexers.embed.passes import Recipe, TransformerPasses
from indexers.embed.rust_tokenizer import RustTokenizer, load, save
from indexers.embed.tokens import untruncated
from indexers.records import Vector

log = logging.getLogger(__name__)

# what the check embeds: short, long (truncated at the model's length), other scripts, markup
SAMPLES = (
    "a",
    "What is the notice period for ending a contract?",
    "The tide tables for the harbour are published every spring. " * 40,
    "数据控制者应当采取适当措施。第十二条",
    "Ünïcödé, numbers 12.5 % and [brackets] <b>tags</b> e-mail@example.com",
)
_VERSIONS = ("torch", "transformers", "sentence-transformers", "tokenizers")


class CheckedPasses(PassEmbedder):
    """A model's passes (``TransformerPasses``) and its tokenizer read from JSON: what a
    ``SentenceTransformerEmbedder`` of that model computes, loaded without sentence-transformers."""

    def __init__(
        self,
        name: str,
        recipe: Recipe,
        tokenizer: RustTokenizer,
        pad_id: int,
        *,
        max_batch: int,
        max_batch_tokens: int,
    ) -> None:
        self._name = name
        self._recipe = dataclasses.replace(recipe, max_batch=max_batch, max_batch_tokens=max_batch_tokens)
        self._passes = TransformerPasses(self._recipe)
        self.device = self._passes.device
        self.configured_device = recipe.device
        self._tokenizer = tokenizer
        self._counter = untruncated(copy.deepcopy(tokenizer))
        self._pad_id = pad_id
        self._max_len = recipe.max_len
        self._dim = recipe.dim
        self._max_batch = max_batch
        self._max_batch_tokens = max_batch_tokens
        log.info("embedder %s on %s, dim %d (checked passes)", name, self.device, self._dim)

    @property
    def model_name(self) -> str:
        return self._name + self.prefixes

    def _forward(self, rows: Sequence[Sequence[int]]) -> Vector:
        return self._passes._forward(rows)

    def passes_loader(self) -> Callable[[], PassEmbedder] | None:
        return functools.partial(TransformerPasses, self._recipe)


def torch_embedder(
    model: str, *, device: str, max_batch: int, max_batch_tokens: int, cache_dir: Path
) -> PassEmbedder:
    """``model`` on torch: its checked passes where a start on this machine checked them, else
    sentence-transformers (and the check, once). ``cache_dir``: where checks are kept (its
    parent is the embedding cache, where a packaged model may be converted)."""
    model_dir = Path(resolve_model(model, cache_dir.parent))
    folder = _folder(model_dir, cache_dir)
    kind = _kind(resolve_device(device))
    state = _state(folder / f"recipe-{kind}.json", model) if folder is not None else None
    if folder is not None and state is not None and state["recipe"] is not None:
        quick = _read(folder, state, model, model_dir, device, max_batch, max_batch_tokens)
        if quick is not None:
            return quick
    full = SentenceTransformerEmbedder(
        model, device=device, max_batch=max_batch, max_batch_tokens=max_batch_tokens
    )
    if folder is not None and (state is None or state["recipe"] is not None):  # a refusal stays
        try:
            _check_and_keep(full, model_dir, folder, kind)
        except Exception:  # the full model serves; the next start checks again
            log.warning("embedder %s: its passes were not checked", model, exc_info=True)
    return full


def _kind(device: str) -> str:
    """The kind of device a check holds for: half precision on a GPU, float32 on a CPU."""
    return "cuda" if device.startswith("cuda") else "cpu"


def _folder(model_dir: Path, cache_dir: Path) -> Path | None:
    """Where the check of the model in ``model_dir`` is kept; None for a hub name."""
    if not (model_dir / "config.json").is_file():
        return None
    digest = hashlib.blake2b(digest_size=8)
    for name in _VERSIONS:
        try:
            digest.update(f"{name}={importlib.metadata.version(name)};".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{name}=;".encode())
    for path in sorted(_model_files(model_dir)):
        digest.update(str(path.relative_to(model_dir)).encode())
        with path.open("rb") as f:
            while block := f.read(1 << 22):
                digest.update(block)
    return cache_dir / f"{model_dir.name}-{digest.hexdigest()}"


def _model_files(model_dir: Path) -> list[Path]:
    """The files sentence-transformers reads: the folder's own, and its modules' folders."""
    files = [
        p
        for p in model_dir.iterdir()
        if p.is_file() and p.suffix in (".json", ".txt", ".safetensors", ".model", ".bin")
    ]
    try:
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
        subdirs = {str(m.get("path", "")) for m in modules if isinstance(m, dict)} - {""}
    except (OSError, ValueError, AttributeError, TypeError):
        subdirs = set()
    for sub in sorted(subdirs):
        if (model_dir / sub).is_dir():
            files += [p for p in (model_dir / sub).iterdir() if p.is_file()]
    return files


def _state(path: Path, model: str) -> dict[str, Any] | None:
    """What a check wrote (its ``recipe`` None where the passes do not reproduce the model);
    None where there is no check, or one that does not read (checked again)."""
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("embedder %s: its check %s does not read (%s): checked again", model, path, e)
        return None
    if not isinstance(state, dict) or "recipe" not in state or not isinstance(state.get("subfolder"), str):
        log.warning("embedder %s: %s is not a check this version reads: checked again", model, path)
        return None
    return state


def _read(
    folder: Path,
    state: dict[str, Any],
    model: str,
    model_dir: Path,
    device: str,
    max_batch: int,
    max_batch_tokens: int,
) -> CheckedPasses | None:
    """The checked passes ``state`` describes, with the tokenizer kept beside them; None where
    they do not load as written (then checked again)."""
    tokenizer = load(folder / "tokenizer.json")
    try:
        recipe = Recipe(**state["recipe"])
    except TypeError:  # written by another version of Recipe
        return None
    if tokenizer is None:
        return None
    recipe = dataclasses.replace(recipe, path=str(model_dir / state["subfolder"]), device=device)
    return CheckedPasses(model, recipe, *tokenizer, max_batch=max_batch, max_batch_tokens=max_batch_tokens)


def _check_and_keep(full: SentenceTransformerEmbedder, model_dir: Path, folder: Path, kind: str) -> None:
    """Compare the passes and the tokenizer read back from JSON with ``full`` on ``SAMPLES``;
    keep the recipe when they agree, the refusal when they do not."""
    folder.mkdir(parents=True, exist_ok=True)
    loader = full.passes_loader()  # None: the passes differ, or the layout is another one
    recipe = loader.args[0] if isinstance(loader, functools.partial) else None
    light = RustTokenizer.of(full._tokenizer)
    kept: dict[str, Any] = {"recipe": None, "subfolder": ""}
    if isinstance(recipe, Recipe) and isinstance(light, RustTokenizer):
        subfolder = os.path.relpath(recipe.path, model_dir)
        save(light, full._pad_id, folder / "tokenizer.json")
        read = load(folder / "tokenizer.json")
        if read is not None and not subfolder.startswith(".."):
            sizes = {"max_batch": full._max_batch, "max_batch_tokens": full._max_batch_tokens}
            checked = CheckedPasses(full._name, recipe, read[0], read[1], **sizes)
            if _agree(full, checked):
                kept = {"recipe": dataclasses.asdict(recipe), "subfolder": subfolder}
    if kept["recipe"] is None:
        log.info("embedder %s: later starts load it through sentence-transformers too", full._name)
    tmp = folder / f"recipe-{kind}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(kept), encoding="utf-8")
    tmp.replace(folder / f"recipe-{kind}.json")


def _agree(full: PassEmbedder, checked: PassEmbedder) -> bool:
    """The same ids and counts, and the same vectors within half precision's steps."""
    texts = list(SAMPLES)
    if full.tokenizers().ids(texts) != checked.tokenizers().ids(texts):
        return False
    if full.count_tokens(texts) != checked.count_tokens(texts):
        return False
    tolerance = 1e-5 if str(getattr(full, "device", "cpu")) == "cpu" else 2e-3  # fp16: two steps
    return bool(np.max(np.abs(full.embed(texts) - checked.embed(texts))) <= tolerance)
