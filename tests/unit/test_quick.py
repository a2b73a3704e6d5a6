"""A start that loads a model's checked passes instead of sentence-transformers
(``indexers.embed.quick``): checked once, then read, and checked again when anything changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from indexers.embed import quick
from indexers.embed.embedder import SentenceTransformerEmbedder, packaged_model_path
from indexers.embed.quick import CheckedPasses, torch_embedder
from indexers.records import Document

SIZES = {"max_batch": 64, "max_batch_tokens": 16_384}


def _load(cache: Path, model: str = "all-MiniLM-L6-v2") -> object:
    return torch_embedder(model, device="cpu", cache_dir=cache, **SIZES)


def _checks(cache: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(cache.glob("*/recipe-cpu.json"))]


def test_a_second_start_reads_the_checked_passes_and_embeds_alike(
    tmp_path: Path, sample_docs: list[Document]
) -> None:
    first = _load(tmp_path)
    assert isinstance(first, SentenceTransformerEmbedder)  # the first start checks
    [check] = _checks(tmp_path)
    assert check["recipe"] is not None and check["subfolder"] == "."
    second = _load(tmp_path)
    assert isinstance(second, CheckedPasses)
    assert (second.model_name, second.dim) == (first.model_name, first.dim)  # the manifest's
    first.set_prefixes(query="q: ")
    second.set_prefixes(query="q: ")
    texts = [d.text for d in sample_docs] + [" ".join(d.text for d in sample_docs), "数据控制者", "a"]
    assert second.tokenizers().ids(texts) == first.tokenizers().ids(texts)
    assert second.count_tokens(texts) == first.count_tokens(texts)
    assert np.abs(second.embed(texts) - first.embed(texts)).max() <= 1e-5
    assert np.abs(second.embed_queries(texts) - first.embed_queries(texts)).max() <= 1e-5
    # the Ray engine's actors get the same passes
    loader = second.passes_loader()
    assert loader is not None
    ids = first.tokenizers().passages(texts)
    assert np.abs(loader().embed_ids(ids) - first.embed_ids(ids)).max() <= 1e-5


def test_a_checked_start_imports_neither_sentence_transformers_nor_transformers(tmp_path: Path) -> None:
    _load(tmp_path)  # the check
    code = (
        "import sys; from pathlib import Path; from indexers.embed.quick import torch_embedder; "
        f"e = torch_embedder('all-MiniLM-L6-v2', device='cpu', cache_dir=Path({str(tmp_path)!r}), "
        "max_batch=64, max_batch_tokens=16384); e.embed(['hello']); "
        "print(type(e).__name__, 'sentence_transformers' in sys.modules, 'transformers' in sys.modules)"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env=env)
    assert out.stdout.decode().split() == ["CheckedPasses", "False", "False"]


def test_another_model_file_is_checked_again(tmp_path: Path) -> None:
    source = packaged_model_path()
    model = tmp_path / "model"
    model.mkdir()
    for path in source.iterdir():
        (model / path.name).symlink_to(path)
    before = quick._folder(model, tmp_path / "cache")
    (model / "config.json").unlink()
    config = json.loads((source / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "layer_norm_eps": 1e-6}))
    after = quick._folder(model, tmp_path / "cache")
    assert before is not None and after is not None and before != after
    assert quick._folder(tmp_path / "no-such-model", tmp_path / "cache") is None  # a hub name


def test_a_model_the_passes_do_not_reproduce_keeps_its_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def differs(self: SentenceTransformerEmbedder) -> None:
        calls.append(1)
        return None

    monkeypatch.setattr(SentenceTransformerEmbedder, "passes_loader", differs)
    assert isinstance(_load(tmp_path), SentenceTransformerEmbedder)
    assert _checks(tmp_path) == [{"recipe": None, "subfolder": ""}]
    assert isinstance(_load(tmp_path), SentenceTransformerEmbedder)
    assert calls == [1]  # not checked at every start


def test_passes_that_embed_otherwise_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forward = CheckedPasses._forward
    monkeypatch.setattr(CheckedPasses, "_forward", lambda self, rows: forward(self, rows) * 0.99)
    assert isinstance(_load(tmp_path), SentenceTransformerEmbedder)
    assert _checks(tmp_path) == [{"recipe": None, "subfolder": ""}]


def test_a_damaged_check_is_made_again(tmp_path: Path) -> None:
    _load(tmp_path)
    [recipe] = tmp_path.glob("*/recipe-cpu.json")
    for damage in ("{not json", json.dumps({"recipe": {"path": "x"}, "subfolder": "."})):
        recipe.write_text(damage)
        assert isinstance(_load(tmp_path), SentenceTransformerEmbedder)
        assert _checks(tmp_path)[0]["recipe"] is not None  # written again, whole
        assert isinstance(_load(tmp_path), CheckedPasses)
    (recipe.parent / "tokenizer.json").write_text("{}")
    assert isinstance(_load(tmp_path), SentenceTransformerEmbedder)
    assert isinstance(_load(tmp_path), CheckedPasses)
