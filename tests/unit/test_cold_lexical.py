"""The cold tier's tantivy index: a bare union of terms when no condition is left."""

from __future__ import annotations

from pathlib import Path

from indexers.text.lexical import Analyzer
from indexers.tiers.cold_lexical import LexicalIndex
from indexers.tiers.query import Filters

TEXTS = [
    "the court may order the erasure of personal data",
    "personal data shall be processed lawfully",
    "erasure without undue delay",
    "a contract between the parties",
    "data about data about data",
]


def _index(tmp_path: Path, tenants: list[str]) -> tuple[LexicalIndex, Analyzer]:
    analyzer = Analyzer()
    index = LexicalIndex(tmp_path / "tantivy")
    rows = [
        (seq, tenant, " ".join(analyzer.terms(text)), None, None, [])
        for seq, (tenant, text) in enumerate(zip(tenants, TEXTS, strict=True), 1)
    ]
    index.apply(rows, [], 1)
    return index, analyzer


def test_without_the_tenant_condition_one_tenant_ranks_and_scores_alike(tmp_path: Path) -> None:
    index, analyzer = _index(tmp_path, ["default"] * len(TEXTS))
    terms = analyzer.terms("erasure of personal data")
    filtered = index.search(terms, Filters(tenant="default"), 10)
    bare = index.search(terms, Filters(tenant="default"), 10, by_tenant=False)
    assert [seq for seq, _ in bare] == [seq for seq, _ in filtered]
    assert [round(s, 5) for _, s in bare] == [round(s, 5) for _, s in filtered]
    assert {seq for seq, _ in bare} == {1, 2, 3, 5}
    index.close()


def test_the_tenant_condition_keeps_the_others_out(tmp_path: Path) -> None:
    index, analyzer = _index(tmp_path, ["default", "acme", "default", "acme", "acme"])
    terms = analyzer.terms("erasure of personal data")
    assert {seq for seq, _ in index.search(terms, Filters(tenant="default"), 10)} == {1, 3}
    assert {seq for seq, _ in index.search(terms, Filters(tenant="acme"), 10)} == {2, 5}
    index.close()
