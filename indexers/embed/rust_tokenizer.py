"""A transformers fast tokenizer as ``Tokenizers`` uses it, over its Rust tokenizer alone.

The Ray engine's prepare workers receive an embedder's ``Tokenizers`` pickled; pickling the
transformers wrappers made every worker import transformers to unpickle them (0.6 s here, and
1.5 s or more on the GPU machine while fifteen workers start at once), before its first unit.
``RustTokenizer`` keeps what ``Tokenizers`` reads — the ``tokenizers.Tokenizer`` (its own pickle:
its JSON), the special token ids, the truncation side — and encodes as the wrapper's ``__call__``
does for single texts: no padding, longest-first truncation to ``max_length`` on that side,
special tokens added (tests/unit/test_rust_tokenizer.py compares the ids with the wrapper's).

``save`` and ``load`` keep one in a JSON file, so that a process that only embeds queries (the
ONNX embedder of a CLI query) loads its tokenizer without importing transformers and torch
(2.7 s of a 2-core machine's CLI query): the file holds the Rust tokenizer exactly as the
transformers wrapper built it from the model's files, and what the wrapper adds around it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class RustTokenizer:
    """The parts of a ``PreTrainedTokenizerFast`` that ``Tokenizers`` and ``WordIds`` use."""

    def __init__(
        self, backend: Any, cls_token_id: int | None, sep_token_id: int | None, truncation_side: str
    ) -> None:
        self.backend_tokenizer = backend
        self.cls_token_id = cls_token_id
        self.sep_token_id = sep_token_id
        self.truncation_side = truncation_side
        self._truncating: dict[int, Any] = {}  # max_length → a copy that truncates to it
        self._lock = threading.Lock()

    @classmethod
    def of(cls, tokenizer: Any) -> Any:
        """``tokenizer`` as a ``RustTokenizer`` when it is a transformers fast tokenizer whose Rust
        tokenizer serialises, else as is."""
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None or isinstance(tokenizer, RustTokenizer):
            return tokenizer
        try:
            copy = _copy(backend)  # a copy: no one else changes its settings
        except Exception:  # a component with no JSON form (a custom Python one): keep the wrapper
            return tokenizer
        return cls(copy, tokenizer.cls_token_id, tokenizer.sep_token_id, str(tokenizer.truncation_side))

    def __reduce__(self) -> tuple[Any, ...]:
        split = bool(getattr(self.backend_tokenizer, "encode_special_tokens", False))
        return (
            _unpickled,
            (self.backend_tokenizer, self.cls_token_id, self.sep_token_id, self.truncation_side, split),
        )

    def __call__(
        self, texts: Sequence[str], *, truncation: bool = True, max_length: int | None = None
    ) -> dict[str, list[list[int]]]:
        """``{"input_ids": …}`` as the wrapper gives them (single texts, no padding)."""
        if not truncation or max_length is None:
            raise ValueError("RustTokenizer encodes truncated to a max_length only")
        encodings = self._truncated(max_length).encode_batch(list(texts), add_special_tokens=True)
        return {"input_ids": [e.ids for e in encodings]}

    def _truncated(self, max_length: int) -> Any:
        with self._lock:  # a Rust tokenizer's settings must not change while another thread encodes
            if max_length not in self._truncating:
                copy = _copy(self.backend_tokenizer)
                copy.no_padding()
                copy.enable_truncation(
                    max_length, stride=0, strategy="longest_first", direction=self.truncation_side
                )
                self._truncating[max_length] = copy
            return self._truncating[max_length]


def _copy(backend: Any) -> Any:
    """A copy of a Rust tokenizer, with the one setting its JSON leaves out: whether special
    tokens in the text are split as words (``split_special_tokens``) instead of matched."""
    from tokenizers import Tokenizer

    copy = Tokenizer.from_str(backend.to_str())
    if hasattr(backend, "encode_special_tokens"):
        copy.encode_special_tokens = backend.encode_special_tokens
    return copy


def _unpickled(
    backend: Any, cls_token_id: int | None, sep_token_id: int | None, truncation_side: str, split: bool
) -> RustTokenizer:
    if split:  # the tokenizer's pickle is its JSON, which leaves this out
        backend.encode_special_tokens = True
    return RustTokenizer(backend, cls_token_id, sep_token_id, truncation_side)


def save(tokenizer: RustTokenizer, pad_token_id: int, path: Path) -> None:
    """``tokenizer`` and its padding id into ``path`` (written whole or not at all)."""
    backend = tokenizer.backend_tokenizer
    state = {
        "tokenizer": backend.to_str(),
        "cls_token_id": tokenizer.cls_token_id,
        "sep_token_id": tokenizer.sep_token_id,
        "pad_token_id": pad_token_id,
        "truncation_side": tokenizer.truncation_side,
        "split_special_tokens": bool(getattr(backend, "encode_special_tokens", False)),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # concurrent writers never share a file
    tmp.write_text(json.dumps(state), encoding="utf-8")
    tmp.replace(path)


def load(path: Path) -> tuple[RustTokenizer, int] | None:
    """What ``save`` wrote, with its padding id; None where there is no such file, or one that
    does not read (it is written again from the model's files)."""
    from tokenizers import Tokenizer

    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        backend = Tokenizer.from_str(state["tokenizer"])
        tokenizer = _unpickled(
            backend,
            state["cls_token_id"],
            state["sep_token_id"],
            state["truncation_side"],
            state["split_special_tokens"],
        )
        return tokenizer, int(state["pad_token_id"])
    except FileNotFoundError:
        return None
    except Exception as e:  # a bad JSON, a missing key, or what tokenizers raises (plain Exception)
        log.warning("tokenizer file %s does not read (%s): made again from the model", path, e)
        return None
