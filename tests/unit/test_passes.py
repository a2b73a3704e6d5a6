"""The model's passes without sentence-transformers (what the Ray engine's actors load)."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from indexers.embed import bert, passes
from indexers.embed.embedder import SentenceTransformerEmbedder, packaged_model_path
from indexers.embed.passes import TransformerPasses
from indexers.embed.tokens import pad
from indexers.records import Document


def test_the_passes_give_the_models_own_vectors(
    embedder: SentenceTransformerEmbedder, sample_docs: list[Document]
) -> None:
    load = embedder.passes_loader()
    assert load is not None
    assert load.args[0].device == "cpu"  # as configured: the actors resolve it where they run
    light = pickle.loads(pickle.dumps(load))()  # as an actor receives it
    assert isinstance(light, TransformerPasses)
    assert light.dim == embedder.dim
    # whole documents, short titles and all of them at once (past 256 tokens: truncated), in one call
    texts = [d.text for d in sample_docs] + [d.title or d.id for d in sample_docs]
    texts.append(" ".join(d.text for d in sample_docs))
    ids = embedder.tokenizers().passages(texts)
    assert max(len(i) for i in ids) == 256 and min(len(i) for i in ids) < 16
    expected = embedder.embed_ids(ids)
    got = light.embed_ids(ids)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-6
    with pytest.raises(NotImplementedError):
        light.tokenizers()  # ids come tokenized: it has no tokenizer to offer


def test_the_passes_load_without_importing_sentence_transformers(
    embedder: SentenceTransformerEmbedder,
) -> None:
    load = embedder.passes_loader()
    assert load is not None
    code = (
        "import pickle, sys; load = pickle.loads(sys.stdin.buffer.read()); p = load(); "
        "print(p.dim, 'sentence_transformers' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(load), capture_output=True, check=True
    )
    # a BERT model: not even transformers (indexers.embed.bert)
    assert out.stdout.decode().split() == ["384", "False", "False"]


def test_no_passes_for_a_pooling_they_do_not_reproduce(
    embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    pooling = embedder._model[1]
    if isinstance(getattr(pooling, "pooling_mode", None), str):
        monkeypatch.setattr(pooling, "pooling_mode", "max")
    else:  # sentence-transformers before 6
        monkeypatch.setattr(pooling, "get_pooling_mode_str", lambda: "max")
    assert embedder.passes_loader() is None


def test_no_passes_when_they_differ_from_the_model(
    embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check on sample texts is what admits the passes: pooling that differs is caught."""
    original = passes.pooled
    monkeypatch.setattr(passes, "pooled", lambda t, m, p, n: original(t, m, "cls", n))
    assert embedder.passes_loader() is None


def test_half_precision_passes_stay_within_its_resolution(sample_docs: list[Document]) -> None:
    """A half-precision model (as on a GPU; here on the CPU): the passes are admitted within two
    fp16 steps of the model's vectors, and load in half precision too."""
    half = SentenceTransformerEmbedder(device="cpu")
    half._model.half()
    load = half.passes_loader()
    assert load is not None
    light = load()
    assert next(light._model.parameters()).dtype == torch.float16
    ids = half.tokenizers().passages([d.text for d in sample_docs])
    diff = np.abs(light.embed_ids(ids) - half.embed_ids(ids)).max()
    assert diff <= 2 * torch.finfo(torch.float16).eps


def _model_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(packaged_model_path(), folder)
    return folder


def test_no_passes_when_the_model_was_loaded_with_other_arguments(tmp_path: Path) -> None:
    """sentence-transformers applies the config arguments its files name (here: four of the six
    layers); the passes load the folder with transformers' defaults, so the check refuses them."""
    folder = _model_copy(tmp_path)
    config = json.loads((folder / "sentence_bert_config.json").read_text())
    config["config_args"] = {"num_hidden_layers": 4}
    (folder / "sentence_bert_config.json").write_text(json.dumps(config))
    model = SentenceTransformerEmbedder(str(folder), device="cpu")
    assert model._model[0].auto_model.config.num_hidden_layers == 4
    assert model.passes_loader() is None


def test_no_passes_when_the_transformer_sits_in_a_subfolder(tmp_path: Path) -> None:
    """An older layout: the transformer's files in 0_Transformer/, not in the model's folder."""
    folder = _model_copy(tmp_path)
    sub = folder / "0_Transformer"
    sub.mkdir()
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
        "special_tokens_map.json",
        "sentence_bert_config.json",
    ):
        if (folder / name).exists():
            (folder / name).rename(sub / name)
    modules = json.loads((folder / "modules.json").read_text())
    modules[0]["path"] = "0_Transformer"
    (folder / "modules.json").write_text(json.dumps(modules))
    model = SentenceTransformerEmbedder(str(folder), device="cpu")
    assert model.passes_loader() is None


def test_a_bert_model_runs_without_transformers_and_gives_its_vectors(
    embedder: SentenceTransformerEmbedder, sample_docs: list[Document]
) -> None:
    """The packaged model is a BERT: its passes run ``indexers.embed.bert`` (the same vectors in
    float32: the same operations in the same order; measured 0.0)."""
    load = embedder.passes_loader()
    assert load is not None
    light = load()
    assert not light.transformers and isinstance(light._model, bert.BertEncoder)
    ids = embedder.tokenizers().passages([d.text for d in sample_docs] + ["a", "数据控制者" * 99])
    assert np.abs(light.embed_ids(ids) - embedder.embed_ids(ids)).max() <= 1e-6


def test_a_checkpoint_of_a_bert_task_model_loads_its_encoder(tmp_path: Path) -> None:
    """Weights saved from a BertFor… model carry "bert." before each name."""
    from safetensors.torch import load_file, save_file

    folder = _model_copy(tmp_path)
    weights = load_file(str(folder / "model.safetensors"))
    save_file({f"bert.{k}": v.contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"))
    prefixed, plain = bert.load(folder), bert.load(packaged_model_path())
    assert prefixed is not None and plain is not None
    ids = torch.tensor([[101, 7592, 2088, 102, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    with torch.inference_mode():
        assert torch.equal(prefixed(ids, mask), plain(ids, mask))


def test_another_configuration_goes_through_transformers(tmp_path: Path, sample_docs: list[Document]) -> None:
    """A configuration ``indexers.embed.bert`` does not reproduce (here another GELU) or weights
    it cannot read: the passes load the model through transformers, and still give its vectors."""
    folder = _model_copy(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["hidden_act"] = "gelu_new"
    (folder / "config.json").write_text(json.dumps(config))
    assert bert.load(folder) is None
    model = SentenceTransformerEmbedder(str(folder), device="cpu")
    load = model.passes_loader()
    assert load is not None
    light = load()
    assert light.transformers
    ids = model.tokenizers().passages([d.text for d in sample_docs])
    assert np.abs(light.embed_ids(ids) - model.embed_ids(ids)).max() <= 1e-6

    sparse = _model_copy(tmp_path / "sparse")  # sizes left to BertConfig's defaults
    config = json.loads((sparse / "config.json").read_text())
    del config["max_position_embeddings"]
    (sparse / "config.json").write_text(json.dumps(config))
    assert bert.load(sparse) is None

    torn = _model_copy(tmp_path / "torn")
    from safetensors.torch import load_file, save_file

    weights = load_file(str(torn / "model.safetensors"))
    weights.pop("encoder.layer.5.output.dense.weight")
    save_file({k: v.contiguous() for k, v in weights.items()}, str(torn / "model.safetensors"))
    assert bert.load(torn) is None


def test_padding_past_the_longest_row_leaves_the_vectors_as_they_were(
    embedder: SentenceTransformerEmbedder, sample_docs: list[Document]
) -> None:
    """On a GPU rows are padded to a multiple of 32 (fewer shapes, fewer kernels to load); the
    padding is masked out, so the vectors are those of the narrowest padding."""
    assert pad([[1] * 33], 0, 32, 256)["input_ids"].shape == (1, 64)
    assert pad([[1] * 250], 0, 32, 256)["input_ids"].shape == (1, 256)
    assert pad([[1] * 250], 0, 32, 250)["input_ids"].shape == (1, 250)  # never past the model's input
    assert pad([[1] * 33], 0)["input_ids"].shape == (1, 33)
    ids = embedder.tokenizers().passages([d.text[:400] for d in sample_docs] + ["short"])
    load = embedder.passes_loader()
    assert load is not None
    light = load()
    longest = max(len(i) for i in ids)
    assert longest % 64 != 0
    for width in (1, 64):
        x = {k: torch.from_numpy(v) for k, v in pad(ids, 0, width, 512).items()}
        assert x["input_ids"].shape[1] == (longest if width == 1 else -(-longest // 64) * 64)
        with torch.inference_mode():
            theirs = embedder._model(dict(x))["sentence_embedding"].numpy()
            tokens = light._model(x["input_ids"], x["attention_mask"])
            ours = passes.pooled(tokens, x["attention_mask"], "mean", True).numpy()
        if width == 1:
            narrow = theirs
        assert np.abs(theirs - narrow).max() <= 1e-6 and np.abs(ours - narrow).max() <= 1e-6
