"""The cold tier's lexical index: tantivy (BM25) over pre-analysed terms, with filters."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import tantivy

from indexers.tiers.cold_store import day_bounds, int_bounds, write_atomic
from indexers.tiers.query import Filters


class Watermarked:
    """What every lexical layout shares (one index here, shards in ``cold_shards``): the version
    it last committed, and ``apply`` as ``add`` then ``commit``."""

    watermark_file: Path

    def watermark(self) -> int:
        try:
            return int(self.watermark_file.read_text())
        except (FileNotFoundError, ValueError):
            return 0

    def apply(
        self,
        rows: Sequence[tuple[Any, ...]],
        deleted: Sequence[int],
        version: int,
        new_above: int | None = None,
    ) -> None:
        self.add(rows, deleted, new_above=new_above)
        self.commit(version)

    def add(
        self, rows: Sequence[tuple[Any, ...]], deleted: Sequence[int], new_above: int | None = None
    ) -> None:
        raise NotImplementedError

    def commit(self, version: int) -> None:
        raise NotImplementedError

    @property
    def empty(self) -> bool:
        """No chunk indexed (committed): a replay has no older copy to delete first."""
        raise NotImplementedError


class LexicalIndex(Watermarked):
    """tantivy over pre-analysed terms (our Analyzer), so both tiers share one vocabulary."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("seq", stored=True, indexed=True, fast=True)
        builder.add_text_field("tenant", tokenizer_name="raw", index_option="basic")
        builder.add_text_field("kw", tokenizer_name="raw", index_option="basic")
        builder.add_text_field("terms", tokenizer_name="whitespace", index_option="position")
        builder.add_integer_field("year", indexed=True, fast=True)
        builder.add_integer_field("day", indexed=True, fast=True)
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=str(path))
        self.writer = self.index.writer(heap_size=64_000_000, num_threads=1)
        self.watermark_file = path / "watermark"

    def reopen_writer(self, *, threads: int, heap_mb: int) -> None:
        """A writer with more indexing threads and memory (bulk loads) or back to one."""
        self.writer.wait_merging_threads()
        self.writer = self.index.writer(heap_size=heap_mb * 1_000_000, num_threads=threads)

    def add(
        self, rows: Sequence[tuple[Any, ...]], deleted: Sequence[int], new_above: int | None = None
    ) -> None:
        """Queue changes (tantivy's threads index them); visible and durable at ``commit``. A row
        whose seq is above ``new_above`` (when known) was never indexed: no older copy to delete first (a
        delete by term costs as much as the add, and bulk loads are all new rows)."""
        for seq in deleted:
            self.writer.delete_documents_by_term("seq", seq)
        for seq, tenant, terms, year, day, kws in rows:
            if new_above is None or seq <= new_above:
                self.writer.delete_documents_by_term("seq", seq)
            doc = tantivy.Document(seq=seq, tenant=tenant, terms=terms, kw=kws)
            if year is not None:
                doc.add_integer("year", year)
            if day is not None:
                doc.add_integer("day", day)
            self.writer.add_document(doc)

    def commit(self, version: int) -> None:
        self.writer.commit()
        self.index.reload()
        write_atomic(self.watermark_file, str(version))

    def search(
        self, terms: Sequence[str], filters: Filters, k: int, *, by_tenant: bool = True
    ) -> list[tuple[int, float]]:
        """BM25's top ``k`` seqs among the rows ``filters`` admit; ``by_tenant=False`` when
        every row is the filter's tenant's (the caller knows).

        With no condition left the query is the bare union of the terms, which tantivy prunes
        with block-max WAND; under a condition it took twice as long (bench/lexical_scale.py,
        10M documents, 300 SciFact queries, p50: 56.5 ms under the tenant's term, 28.3 ms bare,
        23.6 ms bare and without the total count tantivy computes by default)."""
        if not terms:
            return []
        schema = self.schema
        should = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "terms", t)) for t in terms]
        conditions = list(self._conditions(filters, by_tenant))
        query = tantivy.Query.boolean_query(should)
        if conditions:
            query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, query)]
                + [(tantivy.Occur.Must, tantivy.Query.const_score_query(c, 0.0)) for c in conditions]
            )
        searcher = self.index.searcher()
        hits = searcher.search(query, limit=k, count=False).hits  # a count visits every match
        if not hits:
            return []
        seqs = searcher.fast_field_values("seq", [addr for _, addr in hits])
        return [
            (int(seq), float(score)) for (score, _), seq in zip(hits, seqs, strict=True) if seq is not None
        ]

    def _conditions(self, filters: Filters, by_tenant: bool) -> Iterator[tantivy.Query]:
        schema = self.schema
        if by_tenant:
            yield tantivy.Query.term_query(schema, "tenant", filters.tenant)
        for group in filters.keyword_terms():
            yield tantivy.Query.term_set_query(schema, "kw", group)
        for name, field, r, bounds in (
            ("year", "year", filters.year, int_bounds),
            ("date", "day", filters.date, day_bounds),
        ):
            if r is None:
                continue
            lo, hi = bounds(r)
            inside = tantivy.Query.range_query(
                schema,
                field,
                tantivy.FieldType.Integer,
                lo if lo is not None else -(2**62),
                hi if hi is not None else 2**62,
            )
            if not filters.soft(name):
                yield inside
                continue
            # in range, or no value at all (exists_query reads the fast field)
            missing = tantivy.Query.boolean_query(
                [
                    (tantivy.Occur.Must, tantivy.Query.all_query()),
                    (tantivy.Occur.MustNot, tantivy.Query.exists_query(field)),
                ]
            )
            yield tantivy.Query.boolean_query(
                [(tantivy.Occur.Should, inside), (tantivy.Occur.Should, missing)]
            )

    def rollback(self) -> None:
        """Drop what was added since the last commit."""
        self.writer.rollback()

    @property
    def segments(self) -> int:
        """Segments a search visits, one after the other."""
        return int(self.index.searcher().num_segments)

    @property
    def empty(self) -> bool:
        return int(self.index.searcher().num_docs) == 0

    def close(self) -> None:
        self.writer.wait_merging_threads()
