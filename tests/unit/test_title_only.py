"""A document with a title and no text (Cranfield's records, half of them) is found by its title,
in both embedded tiers, and gives back its own empty text: the title is what is searched, never
stored as the document's body."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pytest

from indexers.embed.embedder import AsyncEmbedder
from indexers.ingest.pipeline import Pipeline
from indexers.records import DEFAULT_TENANT, Document
from indexers.text.chunk import Chunker, rebuild
from indexers.text.lexical import Analyzer
from indexers.tiers.base import Tier
from indexers.tiers.query import Filters, SearchQuery
from tests.conftest import CountingEmbedder

TITLE = "experimental investigation of the aerodynamics of a wing in a slipstream"
DOCS = [
    Document("title-only", "", title=TITLE),
    Document("blank-text", " \n", title="heat transfer to a flat plate in hypersonic flow"),
    Document("other", "Boundary layers on cones at supersonic speeds.", title="cones"),
]


def test_the_chunker_gives_a_title_only_document_one_chunk_of_its_empty_text(
    counting_embedder: CountingEmbedder,
) -> None:
    def ids(texts: Sequence[str]) -> list[list[int]]:
        return [[1] * n for n in counting_embedder.count_tokens(texts)]

    chunker = Chunker(counting_embedder.count_tokens, token_ids=ids)
    with_ids = chunker.chunk_many_ids(DOCS[:1])[0]
    assert [i for _, i in with_ids] == [[]]  # the empty text's ids: the title is tokenized on its own
    for chunks in (chunker.chunk(DOCS[0]), [c for c, _ in with_ids]):
        assert [(c.chunk_id, c.text, c.title) for c in chunks] == [("title-only#0", "", TITLE)]
        assert chunks[0].embed_text.strip() == TITLE
        assert rebuild([(c.text, c.metadata["char_start"]) for c in chunks]) == ""
    assert chunker.chunk(Document("nothing", "   ")) == []  # no title, no text: nothing to find


@pytest.mark.parametrize("tier", ["hot", "cold"])
async def test_a_title_only_document_is_found_by_its_title(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier], tier: str
) -> None:
    embedder = AsyncEmbedder(counting_embedder)
    pipeline = Pipeline(
        embedder=embedder,
        chunker=Chunker(counting_embedder.count_tokens),
        tiers=tiers,  # type: ignore[arg-type]
        today=lambda: dt.date(2026, 1, 1),
    )
    report = await pipeline.ingest(DOCS, placement=tier)  # type: ignore[arg-type]
    assert report.count("failed") == 0 and report.chunks_written == 3
    queries = [(DOCS[0], "aerodynamics of a wing in a slipstream"), (DOCS[1], "hypersonic flat plate")]
    for doc, query in queries:
        found = await tiers[tier].search(
            SearchQuery(
                text=query,
                terms=Analyzer().query_terms(query),
                vector=await embedder.embed_query(query),
                filters=Filters(tenant=DEFAULT_TENANT),
                k=3,
            )
        )
        for leg in ("dense", "lexical"):
            top = found[leg][0].chunk
            assert top is not None and top.doc_id == doc.id, (leg, found[leg])
        stored = await tiers[tier].fetch(DEFAULT_TENANT, [doc.id])
        assert [(c.text, c.title) for c in stored] == [(doc.text, doc.title)]  # the body is not the title
