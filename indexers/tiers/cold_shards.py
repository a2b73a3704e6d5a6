"""The cold tier's lexical index split into shards that a search visits side by side.

tantivy searches an index's segments one after the other on the calling thread (tantivy-py
offers no executor), and at 10M chunks that leg took 69 ms p50 on the H200 host, the slower of
the two. Shards searched in threads (tantivy releases the GIL) divide it by the cores they get:
at 10M documents on 2 cores four shards took 14.9 ms p50 against one index's 26.9
(``bench/lexical_shards.py``, docs/benchmarks.md). Each shard scores BM25 with its own
statistics, as an Elasticsearch shard does: the merged lists kept 0.984 of one index's top 10
there, 0.954 at 200k documents, so a small store keeps one index (the default).

Chunk ``seq`` lives in shard ``seq % shards``. The count is the store's layout: ``tantivy/``
for one index, ``tantivy-N/`` for N shards (each a ``LexicalIndex`` in ``0``..``N-1``, and one
watermark over them, written after every shard committed). A start with another count opens
that layout empty, and the catch-up fills it from SQLite (every chunk, once), after which the
old layout is removed: a crash meanwhile leaves the old layout in place and the next start
catches up again. A crash between the shards' commits leaves the watermark behind: the
catch-up replays from it, deleting each chunk before adding it, so nothing is indexed twice.
"""

from __future__ import annotations

import heapq
import logging
import shutil
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path
from typing import Any

from indexers.tiers.cold_lexical import LexicalIndex, Watermarked
from indexers.tiers.cold_store import lexical_rows, write_atomic
from indexers.tiers.query import Filters

log = logging.getLogger(__name__)

REPLAY_PAGE = 50_000  # rows read from SQLite at a time when tantivy catches up


class ShardedLexical(Watermarked):
    """``LexicalIndex``'s interface over ``shards`` of them, searched in threads."""

    def __init__(self, path: Path, shards: int) -> None:
        if shards < 2:
            raise ValueError(f"a sharded lexical index needs 2 shards or more, not {shards}")
        path.mkdir(parents=True, exist_ok=True)
        self.parts = [LexicalIndex(path / str(i)) for i in range(shards)]
        self.watermark_file = path / "watermark"
        self._pool = ThreadPoolExecutor(max_workers=shards, thread_name_prefix="tantivy-shard")

    def _split(self, seqs: Sequence[int]) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.parts]
        for seq in seqs:
            out[seq % len(self.parts)].append(seq)
        return out

    def reopen_writer(self, *, threads: int, heap_mb: int) -> None:
        n = len(self.parts)
        for part in self.parts:  # tantivy wants ≥ 15 MB a thread
            part.reopen_writer(threads=max(1, threads // n), heap_mb=max(64, heap_mb // n))

    def add(
        self, rows: Sequence[tuple[Any, ...]], deleted: Sequence[int], new_above: int | None = None
    ) -> None:
        n = len(self.parts)
        by_shard: list[list[tuple[Any, ...]]] = [[] for _ in self.parts]
        for row in rows:
            by_shard[row[0] % n].append(row)
        for part, mine, gone in zip(self.parts, by_shard, self._split(deleted), strict=True):
            if mine or gone:
                part.add(mine, gone, new_above=new_above)

    def commit(self, version: int) -> None:
        for part in self.parts:
            part.commit(version)
        write_atomic(self.watermark_file, str(version))  # every shard has committed

    def rollback(self) -> None:
        for part in self.parts:
            part.rollback()

    def search(
        self, terms: Sequence[str], filters: Filters, k: int, *, by_tenant: bool = True
    ) -> list[tuple[int, float]]:
        """Each shard's top ``k``, searched side by side, merged by score."""
        if not terms:
            return []
        found = self._pool.map(lambda part: part.search(terms, filters, k, by_tenant=by_tenant), self.parts)
        return heapq.nlargest(k, chain.from_iterable(found), key=lambda hit: hit[1])

    @property
    def segments(self) -> int:
        return sum(part.segments for part in self.parts)

    @property
    def empty(self) -> bool:
        return all(part.empty for part in self.parts)

    def close(self) -> None:
        for part in self.parts:
            part.close()
        self._pool.shutdown()


Lexical = LexicalIndex | ShardedLexical


def layout(cold: Path, shards: int) -> Path:
    """Where the lexical index of ``shards`` shards lives in the cold tier's folder."""
    return cold / "tantivy" if shards == 1 else cold / f"tantivy-{shards}"


def open_lexical(cold: Path, shards: int) -> Lexical:
    """The lexical index in ``cold`` with ``shards`` shards (empty when the store had another
    count: the catch-up fills it from SQLite)."""
    if shards < 1:
        raise ValueError(f"lexical shards must be 1 or more, not {shards}")
    path = layout(cold, shards)
    others = [p for p in _layouts(cold) if p != path]
    if others and not path.exists():
        log.warning(
            "cold tier: the lexical index is %s, the settings ask for %d shard(s): every chunk is "
            "indexed again from SQLite into %s (once)",
            ", ".join(p.name for p in others),
            shards,
            path.name,
        )
    return LexicalIndex(path) if shards == 1 else ShardedLexical(path, shards)


def drop_other_layouts(cold: Path, shards: int) -> None:
    """Remove lexical indexes of other shard counts (once the one of ``shards`` caught up)."""
    for path in _layouts(cold):
        if path != layout(cold, shards):
            log.info(
                "cold tier: removing the lexical index %s (now %s)", path.name, layout(cold, shards).name
            )
            shutil.rmtree(path, ignore_errors=True)


def _layouts(cold: Path) -> list[Path]:
    if not cold.is_dir():
        return []
    return sorted(
        p
        for p in cold.iterdir()
        if p.is_dir() and (p.name == "tantivy" or (p.name.startswith("tantivy-") and p.name[8:].isdigit()))
    )


def catch_up_lexical(conn: sqlite3.Connection, lexical: Lexical, version: int) -> None:
    """Replay into ``lexical`` every change SQLite holds past its watermark, up to ``version``.

    Rows are read in pages of ``REPLAY_PAGE`` by seq (a new layout replays every chunk: at 10M
    chunks one list of all their terms would take gigabytes). Into an index that holds chunks,
    each is deleted before it is added (a crash may have left some committed), and each page is
    committed at the old watermark: tantivy keeps every pending delete in memory until a commit
    (1M chunks replayed in one commit peaked at 1.5 GB, paged 0.4 GB; into an empty layout, with
    no deletes, 0.26 GB and a quarter faster). The watermark moves to ``version`` at the end."""
    mark = lexical.watermark()
    if mark >= version:
        return
    deleted = [r[0] for r in conn.execute("SELECT seq FROM tombstones WHERE version > ?", (mark,))]
    fresh = lexical.empty  # nothing indexed: no older copy of any row to delete first
    lexical.add([], [] if fresh else deleted)
    replayed, last = 0, -1
    while True:  # a page's seqs by keyset, never every seq at once (10M ints: ~0.4 GB of Python)
        page = [
            r[0]
            for r in conn.execute(
                "SELECT seq FROM chunks WHERE version > ? AND seq > ? ORDER BY seq LIMIT ?",
                (mark, last, REPLAY_PAGE),
            )
        ]
        if not page:
            break
        rows = lexical_rows(conn, "seq BETWEEN ? AND ? AND version > ?", page[0], page[-1], mark)
        lexical.add(rows, [], new_above=0 if fresh else None)
        replayed, last = replayed + len(page), page[-1]
        if len(page) == REPLAY_PAGE:
            lexical.commit(mark)  # the pending deletes and rows leave memory; the mark stays
    lexical.commit(version)
    log.info("cold tier: tantivy caught up %d changes, %d deletions", replayed, len(deleted))
