"""Tokenizers pickled over their Rust tokenizers: the same ids, without transformers."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.embed.rust_tokenizer import RustTokenizer
from indexers.embed.tokens import Tokenizers
from tests.unit.test_wordpiece import HOSTILE, shipped_texts


def test_pickled_tokenizers_give_the_same_ids_and_counts(embedder: SentenceTransformerEmbedder) -> None:
    original = embedder.tokenizers()
    light = pickle.loads(pickle.dumps(original))  # what a Ray worker receives
    assert isinstance(light.tokenizer, RustTokenizer) and isinstance(light.counter, RustTokenizer)
    texts = shipped_texts() + HOSTILE + [" ".join(shipped_texts()[:40])]  # the last past 256 tokens
    assert light.ids(texts) == original.ids(texts)
    assert light.count(texts) == original.count(texts)
    # the path without the word memo: the tokenizer's own call, truncated
    whole = Tokenizers(light.tokenizer, light.counter, light.max_len)
    reference = Tokenizers(original.tokenizer, original.counter, original.max_len)
    assert whole.ids(texts) == reference.ids(texts) == original.ids(texts)
    assert whole.count(texts) == reference.count(texts)


def test_a_worker_unpickles_them_without_transformers(embedder: SentenceTransformerEmbedder) -> None:
    code = (
        "import pickle, sys; t = pickle.loads(sys.stdin.buffer.read()); "
        "print(t.ids(['Hello world'])[0], 'transformers' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(embedder.tokenizers()),
        capture_output=True,
        check=True,
    )
    ids, imported = out.stdout.decode().rsplit(" ", 1)
    assert ids == str(embedder.tokenizers().ids(["Hello world"])[0]) and imported.strip() == "False"


@pytest.mark.parametrize("side", ["right", "left"])
def test_another_kind_of_tokenizer_truncates_as_its_wrapper_does(side: str) -> None:
    """A byte-level BPE (not WordPiece: no word memo) with special tokens added around each text."""
    from transformers import PreTrainedTokenizerFast

    texts = shipped_texts()
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>", "<s>", "</s>", "<pad>"])
    bpe.train_from_iterator(texts[:200], trainer)
    bpe.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        special_tokens=[("<s>", bpe.token_to_id("<s>")), ("</s>", bpe.token_to_id("</s>"))],
    )
    wrapper = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    wrapper.truncation_side = side
    light = pickle.loads(pickle.dumps(RustTokenizer.of(wrapper)))
    sample = texts + HOSTILE
    expected = wrapper(sample, truncation=True, max_length=48)["input_ids"]
    assert any(len(e) == 48 for e in expected) and any(len(e) < 48 for e in expected)
    assert light(sample, truncation=True, max_length=48)["input_ids"] == expected


def test_a_tokenizer_without_a_json_form_stays_as_it_is() -> None:
    class Custom:  # a Rust tokenizer with a custom (Python) component cannot be serialised
        def to_str(self) -> str:
            raise Exception("Custom PreTokenizer cannot be serialized")

    class Wrapper:
        backend_tokenizer = Custom()

    wrapper = Wrapper()
    assert RustTokenizer.of(wrapper) is wrapper


def test_special_tokens_split_as_words_stay_split() -> None:
    """``split_special_tokens``: "[SEP]" in a text is read as words, not as the token; the Rust
    tokenizer's JSON (and so its pickle) leaves that setting out."""
    from transformers import AutoTokenizer

    from indexers.embed.embedder import packaged_model_path
    from indexers.embed.tokens import plain_ids, untruncated

    wrapper = AutoTokenizer.from_pretrained(str(packaged_model_path()), split_special_tokens=True)
    light = pickle.loads(pickle.dumps(RustTokenizer.of(wrapper)))
    texts = ["a [SEP] b", "[CLS] and [MASK]ed", "plain text"]
    expected = wrapper(texts, truncation=True, max_length=16)["input_ids"]
    assert expected[0] != wrapper(["a"], truncation=True, max_length=16)["input_ids"][0]
    assert wrapper.sep_token_id not in expected[0][1:-1]  # split: no [SEP] inside the text
    assert light(texts, truncation=True, max_length=16)["input_ids"] == expected
    counter = untruncated(copy.deepcopy(wrapper))  # as the embedders count
    assert plain_ids(pickle.loads(pickle.dumps(RustTokenizer.of(counter))), texts) == plain_ids(
        counter, texts
    )
