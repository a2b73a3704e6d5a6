"""The embedder on ONNX Runtime: exported offline from the sentence-transformers model, cached.

``onnx`` is the fp32 graph (its vectors equal PyTorch's to ~1e-7); ``onnx-int8`` is the same
graph with dynamically quantised weights (faster on CPU, not identical: use it only where the
evaluation says so, docs/benchmarks.md). The export runs once per model into ``cache_dir``
(keyed by the weights' hash) and needs PyTorch only then; mean pooling and L2 normalisation
are done in numpy, as the sentence-transformers pipeline does them. The tokenizer is kept there
too, as transformers builds it from the model's files (``rust_tokenizer.save``): a later load
reads it with the ``tokenizers`` library alone, so a process that embeds a CLI query imports
neither transformers nor torch (2.7 s of its time on a busy 2-core machine).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from indexers.embed.base import PassEmbedder
from indexers.embed.embedder import resolve_model
from indexers.embed.rust_tokenizer import RustTokenizer, load, save
from indexers.embed.tokens import pad, untruncated
from indexers.records import Vector

log = logging.getLogger(__name__)

OnnxBackend = Literal["onnx", "onnx-int8"]
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# What AutoTokenizer reads from a model folder (tokenizer.json, its config, vocab.txt, merges.txt,
# special_tokens_map.json, added_tokens.json, SentencePiece's files).
_TOKENIZER_FILES = (
    "tokenizer",
    "special_tokens",
    "added_tokens",
    "vocab",
    "merges",
    "sentencepiece",
    "spiece",
)


def _fingerprint(model_dir: Path) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for name in ("model.safetensors", "pytorch_model.bin", "config.json"):
        path = model_dir / name
        if path.exists():
            digest.update(name.encode())
            digest.update(str(path.stat().st_size).encode())
            with path.open("rb") as f:
                digest.update(f.read(1 << 20))
    return digest.hexdigest()


def _tokenizer_fingerprint(model_dir: Path) -> str:
    """The tokenizer's files, whole: a folder with other ones gets a tokenizer of its own."""
    digest = hashlib.blake2b(digest_size=8)
    for path in sorted(model_dir.iterdir()):
        if path.is_file() and path.name.startswith(_TOKENIZER_FILES):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def load_tokenizer(model_dir: Path, folder: Path) -> tuple[Any, int]:
    """The model's tokenizer (as ``AutoTokenizer`` builds it) and its padding id.

    Read from ``folder`` where an earlier load left it; else built by transformers (imported
    only then) and left there, when its Rust tokenizer has a JSON form. The first load returns
    the same ``RustTokenizer`` later ones read, so every load tokenizes alike."""
    path = folder / f"tokenizer-{_tokenizer_fingerprint(model_dir)}.json"
    saved = load(path)
    if saved is not None:
        return saved
    from transformers import AutoTokenizer

    wrapper = AutoTokenizer.from_pretrained(str(model_dir))
    pad_id = int(wrapper.pad_token_id or 0)
    light = RustTokenizer.of(wrapper)
    if isinstance(light, RustTokenizer):
        save(light, pad_id, path)
    return light, pad_id


def export(model_dir: Path, dest: Path) -> None:
    """The transformer of a sentence-transformers model → ONNX (opset 17, dynamic batch and length)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    # No "Loading weights" bar in the output of the command that exports (once per machine)
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    transformers_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    model = SentenceTransformer(str(model_dir), device="cpu")
    pooling: Any = model[1] if len(model) > 1 else None
    mode = getattr(pooling, "pooling_mode", None)  # sentence-transformers ≥ 6; older: a method
    if mode is None and hasattr(pooling, "get_pooling_mode_str"):
        mode = pooling.get_pooling_mode_str()
    if mode != "mean":  # the ONNX path pools by mean (``_forward``): refuse rather than mis-embed
        raise ValueError(
            f"{model_dir} pools by {mode or 'no pooling module'}, the ONNX backend by mean: "
            "set RAG_EMBEDDING__BACKEND=torch for this model"
        )
    bert = cast(torch.nn.Module, model[0].auto_model)
    bert.eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    # Trace with real padding: an all-ones mask lets the model skip masking in the traced graph.
    sample = model.tokenizer(
        ["a short one", "and a somewhat longer example sentence"], padding=True, return_tensors="pt"
    )
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(f".{os.getpid()}.tmp")  # concurrent exports never share a file
    # The TorchScript exporter (dynamo=False): the torch.export one needs onnxscript. Its
    # deprecation notice and tracer warnings are expected; the test suite checks the exported
    # graph against PyTorch on padded batches of different lengths.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _export(torch, Encoder(), sample, tmp)
    tmp.replace(dest)


def _export(torch: Any, encoder: Any, sample: Any, tmp: Path) -> None:
    torch.onnx.export(
        encoder.eval(),  # eval: export restores the wrapper's mode on the model afterwards
        tuple(sample[k] for k in _INPUTS),
        str(tmp),
        input_names=list(_INPUTS),
        output_names=["last_hidden_state"],
        dynamic_axes={n: {0: "batch", 1: "tokens"} for n in (*_INPUTS, "last_hidden_state")},
        opset_version=17,
        dynamo=False,
    )


def quantize(source: Path, dest: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = dest.with_suffix(f".{os.getpid()}.tmp")
    quantize_dynamic(str(source), str(tmp), weight_type=QuantType.QInt8)
    tmp.replace(dest)


class OnnxEmbedder(PassEmbedder):
    """Same contract as ``SentenceTransformerEmbedder`` (length-sorted, token-bounded batches)."""

    def __init__(
        self,
        model: str,
        *,
        backend: OnnxBackend = "onnx",
        cache_dir: Path,
        max_batch: int = 64,
        max_batch_tokens: int = 16_384,
        threads: int | None = None,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        model_dir = Path(resolve_model(model, cache_dir.parent))  # cache_dir is the setting's onnx/
        folder = cache_dir / f"{model_dir.name}-{_fingerprint(model_dir)}"
        fp32 = folder / "model.onnx"
        if not fp32.exists():
            log.info("exporting %s to ONNX in %s (once)", model, folder)
            export(model_dir, fp32)
        path = fp32
        if backend == "onnx-int8":
            path = folder / "model-int8.onnx"
            if not path.exists():
                quantize(fp32, path)
        self._path = path
        self._threads = threads or os.cpu_count() or 1
        self._session = _session(path, self._threads)
        self._tokenizer, self._pad_id = load_tokenizer(model_dir, folder)
        self._counter = untruncated(copy.deepcopy(self._tokenizer))
        self._max_len = 256
        self._dim = int(self._session.get_outputs()[0].shape[-1] or 384)
        self._name = model
        self.backend = backend
        self.device = "cpu"
        self._max_batch = max_batch
        self._max_batch_tokens = max_batch_tokens

    def with_threads(self, threads: int, *, max_batch: int | None = None) -> OnnxEmbedder:
        """The same model in a session of its own with ``threads`` intra-op threads.

        ``max_batch`` bounds each forward pass: a call's texts are sorted by length and run in
        passes of that many, so short queries are not padded to a long one's length (measured
        on 2 cores: batches of 32 queries in passes of 4 ran 315 queries/s, in one pass 175).

        For the query lane: several single-threaded sessions, each running its own batch, keep
        a shared 2-core machine busier than one session whose every operator waits for its
        slowest thread. The tokenizer is copied (a Rust tokenizer used from two threads at once
        raises "Already borrowed"); the weights are loaded again (~90 MB). Its pool threads stop
        spinning when a run returns: measured here, a pool still spinning after a query's pass
        held a core while that query's tier searches ran, and doubled their time.
        """
        clone = copy.copy(self)
        clone._threads = threads
        clone._max_batch = max_batch or self._max_batch
        clone._session = _session(self._path, threads, linger=False)
        clone._tokenizer = copy.deepcopy(self._tokenizer)
        clone._counter = untruncated(copy.deepcopy(self._tokenizer))
        return clone

    @property
    def model_name(self) -> str:
        return f"{self._name}@{self.backend}{self.prefixes}"

    def _forward(self, rows: Sequence[Sequence[int]]) -> Vector:
        feeds = pad(rows, self._pad_id)
        hidden = self._session.run(None, feeds)[0]
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        return np.asarray(pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None))


def _session(path: Path, threads: int, *, linger: bool = True) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    if not linger:  # pool threads spin inside a run (its speed-up) but stop the moment it returns
        options.add_session_config_entry("session.force_spinning_stop", "1")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
