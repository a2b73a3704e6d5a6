"""``serve``'s start on an existing index: the model loads while the tiers open."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.manifest import MANIFEST, IndexManifest, IndexMismatch, check_manifest
from indexers.tiers.local_cold import LocalCold, LocalColdTier
from rag_router import services, stores
from rag_router.settings import Settings


async def test_the_model_loads_while_the_tiers_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: SentenceTransformerEmbedder
) -> None:
    settings = Settings(data_dir=tmp_path)
    first = await services.build_services(settings, embedder)  # writes the manifest
    await first.close()
    assert (tmp_path / MANIFEST).exists()
    opening = threading.Event()
    ensure = LocalCold.ensure

    def ensure_and_say(self: LocalCold) -> None:
        opening.set()
        ensure(self)

    def load(s: Settings) -> SentenceTransformerEmbedder:
        # one after the other, the cold tier would open only after this returned: the wait fails
        assert opening.wait(timeout=30), "the tiers did not begin to open while the model loaded"
        return embedder

    monkeypatch.setattr(LocalCold, "ensure", ensure_and_say)
    monkeypatch.setattr(stores, "build_embedder", load)
    started = await services.build_services(settings)
    assert started.embedder is embedder
    assert await started.tiers["cold"].count() == 0
    await started.close()


async def test_a_model_the_index_was_not_written_with_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: SentenceTransformerEmbedder
) -> None:
    check_manifest(tmp_path, IndexManifest("intfloat/multilingual-e5-small", embedder.dim))
    monkeypatch.setattr(stores, "build_embedder", lambda s: embedder)
    closed: list[str] = []
    close = LocalColdTier.close

    async def close_and_say(self: LocalColdTier) -> None:
        closed.append(self.engine)
        await close(self)

    monkeypatch.setattr(LocalColdTier, "close", close_and_say)
    with pytest.raises(IndexMismatch, match="multilingual-e5-small"):
        await services.build_services(Settings(data_dir=tmp_path))
    assert closed == ["tantivy+faiss+sqlite"]  # the tiers it had opened are closed again
