"""The embedded cold tier's bulk loads: segments built by workers, adopted by the tier's owner.

``LocalCold`` takes these methods from ``BulkLoads``: between ``bulk_begin`` and ``bulk_end``,
``adopt`` copies groups of segments into SQLite (``cold_segment``), a thread feeds tantivy from
the adopted rows beside the next adoption, ``bulk_commit`` makes them searchable and durable in
tantivy, and FAISS is built once at the end.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from indexers.records import Vector
from indexers.sqlite import Checkpointer
from indexers.tiers.cold_segment import ADOPT_GROUP, ColdLookup, adopt
from indexers.tiers.cold_shards import Lexical
from indexers.tiers.cold_store import Store, last_seq, lexical_rows, tombstones, vector_rows
from indexers.tiers.cold_vectors import KMeans, VectorIndex

log = logging.getLogger(__name__)

BULK_CACHE_MIB = 512  # SQLite writer's page cache during bulk loads (cold_segment: why)
# The WAL's size past which the owner waits for its copy before writing on, so that it starts over
# (``Checkpointer``): a bulk load's disk overhead; each wait costs the owner up to a transaction's copy.
BULK_WAL_LIMIT = 1 << 30


class BulkLoads:
    """Bulk loads of a ``LocalCold`` (which provides ``_parts`` and ``_catch_up``)."""

    _path: Path
    _dim: int

    def __init__(self) -> None:
        self._bulk = False
        self._feeder = ThreadPoolExecutor(1, thread_name_prefix="cold-bulk-lexical")
        self._feeding: list[Future[None]] = []  # rows fed to tantivy and commits, in order
        self._feed_failed: BaseException | None = None
        self._kmeans: KMeans | None = None
        self._adopted: list[tuple[np.ndarray[Any, Any], Vector]] | None = None
        self._tombstones_before = 0
        self._version_before = 0
        self._checkpointer: Checkpointer | None = None  # the WAL copied beside adoption (bulk mode)
        # busy time of bulk loads: adopt (SQLite; in it adopt_wal_wait, waiting for the WAL's copy
        # at its limit), read (rows read back), lexical (tantivy), checkpoint (the WAL copied into
        # the database beside the adoption: ``Checkpointer``), vectors (FAISS at the end; its
        # build's steps and its save also apart: vectors_train, _add, _save)
        self.bulk_seconds: dict[str, float] = {}

    # LocalCold's: the tier's parts, opened; and its catch-up (store, lexical, vectors, k-means, regrow)
    _parts: Callable[[], tuple[Store, Lexical, VectorIndex]]
    _catch_up: Callable[[Store, Lexical, VectorIndex, KMeans | None, bool], None]

    def lookup(self) -> ColdLookup:
        """Reads of stored hashes for other processes (the Ray engine's workers)."""
        return ColdLookup(self._path / "cold.sqlite")

    def bulk_begin(self, *, threads: int = 4, heap_mb: int = 512, kmeans: KMeans | None = None) -> None:
        """Until ``bulk_end``: tantivy indexes with ``threads`` and commits on ``bulk_commit`` or
        ``bulk_commit_later``, FAISS is brought up to date once at the end (searches meanwhile
        miss the new vectors; ``kmeans`` trains its lists and puts vectors in them, on a GPU
        say). Into an empty tier, the adopted vectors are kept in memory as they come, so the
        end builds FAISS without reading SQLite back. SQLite's writer keeps up to
        ``BULK_CACHE_MIB`` of pages meanwhile (the indexes' pages, which every adoption
        rewrites, stay in memory), and a thread of its own copies the WAL into the database
        after each adoption (``Checkpointer``)."""
        store, lexical, vectors = self._parts()
        with store.write_lock:
            store.writer.execute(f"PRAGMA cache_size=-{BULK_CACHE_MIB * 1024}")
            lexical.reopen_writer(threads=threads, heap_mb=heap_mb)
            self._feed_failed = None
            self._kmeans = kmeans
            self._adopted = [] if vectors.index.ntotal == 0 else None
            self._tombstones_before = tombstones(store)
            self._version_before = store.version()
            self._stop_checkpointer()  # a bulk load begun again
            self._checkpointer = Checkpointer(
                store.writer, self._path / "cold.sqlite", wal_limit=BULK_WAL_LIMIT
            )
            self._bulk = True

    def adopt(self, segments: Sequence[Path]) -> int:
        """Copy worker-built segments (at most ``ADOPT_GROUP``) into the tier in one transaction,
        each with a version of its own; returns their rows."""
        store, lexical, vectors = self._parts()
        if not segments:
            return 0
        if len(segments) > ADOPT_GROUP:
            raise ValueError(f"at most {ADOPT_GROUP} segments a transaction, not {len(segments)}")
        waited = time.perf_counter()
        with store.write_lock:
            self._spent("adopt_wait", waited)
            began = time.perf_counter()
            if self._checkpointer is not None:  # past its limit the WAL starts over with this one
                self._checkpointer.writing()
            conn, attached, n = store.writer, [], 0
            try:
                for i, segment in enumerate(segments):  # attached outside the transaction
                    conn.execute(f"ATTACH DATABASE ? AS seg{i}", (str(segment),))
                    attached.append(f"seg{i}")
                with store.transaction():
                    last = last_seq(conn)  # rows above it are new: tantivy has nothing to replace
                    versions = []
                    for name in attached:
                        versions.append(store.next_version(conn))
                        n += adopt(conn, versions[-1], name)
                        # known before the rows are visible: while the store holds one tenant,
                        # searches skip the tenant filter (``LocalCold.search``)
                        store.tenants.update(
                            r[0] for r in conn.execute(f"SELECT DISTINCT tenant FROM {name}.chunks")
                        )
                first, version = versions[0], versions[-1]
                if self._checkpointer is not None:
                    self._checkpointer.committed()
            finally:  # the transaction is over (committed or rolled back): each detaches
                for name in attached:
                    try:
                        conn.execute(f"DETACH DATABASE {name}")
                    except sqlite3.Error:
                        log.exception("cold tier: could not detach segment %s", name)
            self._spent("adopt", began)
            if self._bulk:  # tantivy is fed beside the next adoption (SQLite releases the GIL)
                self._feeding.append(self._feeder.submit(self._feed, first, version, last))
                return n
            reader, where = store.reader(), "version BETWEEN ? AND ?"
            lexical.apply(lexical_rows(reader, where, first, version), [], version, new_above=last)
            seqs, vecs = vector_rows(reader, self._dim, where, first, version)
            vectors.apply(seqs.tolist(), vecs, [])
        return n

    def _feed(self, first: int, version: int, last: int) -> None:
        try:
            self._feed_rows(first, version, last)
        except BaseException as exc:
            self._feed_failed = exc  # no commit queued after this one may advance the watermark
            raise

    def _feed_rows(self, first: int, version: int, last: int) -> None:
        began = time.perf_counter()
        store, lexical, _ = self._parts()
        conn = store.reader()
        rows = lexical_rows(conn, "version BETWEEN ? AND ?", first, version)
        if self._adopted is not None:
            self._adopted.append(vector_rows(conn, self._dim, "version BETWEEN ? AND ?", first, version))
        self._spent("read", began)  # the adopted rows read back (what tantivy and FAISS take)
        began = time.perf_counter()
        lexical.add(rows, [], new_above=last)
        self._spent("lexical", began)

    def _drain_feeding(self) -> None:
        """Wait for the adopted rows still being fed to tantivy (its writer takes one caller at
        a time; under ``write_lock``, so no more are queued meanwhile). After a failed feed, the
        other writes wait for ``bulk_end`` to repair tantivy: one of them committing now would
        move tantivy's watermark past rows it never took."""
        feeding, self._feeding = self._feeding, []
        for future in feeding:
            future.result()
        if self._feed_failed is not None:
            raise RuntimeError("cold tier: feeding tantivy failed; writes wait for the bulk load's end")

    def _spent(self, stage: str, began: float) -> None:
        self._add(stage, time.perf_counter() - began)

    def _add(self, stage: str, seconds: float) -> None:
        self.bulk_seconds[stage] = self.bulk_seconds.get(stage, 0.0) + seconds

    def bulk_commit(self) -> None:
        """Make what was adopted so far searchable by terms and durable in tantivy."""
        self.bulk_commit_later().result()

    def bulk_commit_later(self) -> Future[None]:
        """``bulk_commit`` queued behind the rows being fed to tantivy: the caller goes on
        adopting meanwhile, and the future is done once everything adopted before this call is
        searchable and durable in tantivy (it fails, committing nothing, if feeding failed)."""
        store, _, _ = self._parts()
        with store.write_lock:
            future = self._feeder.submit(self._commit_fed, store.version())
            self._feeding.append(future)
        return future

    def _commit_fed(self, version: int) -> None:
        if self._feed_failed is not None:
            raise RuntimeError("cold tier: feeding tantivy failed; not committed") from self._feed_failed
        began = time.perf_counter()
        self._parts()[1].commit(version)
        self._spent("lexical", began)

    def bulk_end(self) -> None:
        """Commit tantivy and, beside that commit, build FAISS from the adopted vectors (or bring
        it up to date from SQLite). When feeding tantivy failed, what it took since its last
        commit is rolled back and it catches up from SQLite (which holds every adopted row); the
        failure is raised."""
        committing = self.bulk_commit_later()  # in the feeder's thread, FAISS's build in this one
        store, lexical, vectors = self._parts()
        with store.write_lock:  # the bulk writer stays (its merges finish in the background)
            self._bulk = False
            store.writer.execute("PRAGMA cache_size=-2000")  # SQLite's default, 2 MiB
            if self._checkpointer is not None:
                self._checkpointer.stop()  # its last checkpoint beside FAISS's build and the commit
            try:
                failed = self._end(store, lexical, vectors, committing)
            finally:
                self._stop_checkpointer()
        if failed is not None:
            raise failed

    def _end(
        self, store: Store, lexical: Lexical, vectors: VectorIndex, committing: Future[None]
    ) -> Exception | None:
        """``bulk_end`` under the write lock; the last commit's failure, if it failed."""
        # every feed before the commit done, none failed (a write since may have reported one)
        fed = self._fed(before=committing) and self._feed_failed is None
        adopted, self._adopted = self._adopted, None
        began = time.perf_counter()
        built, kmeans = False, self._kmeans
        if fed and adopted and tombstones(store) == self._tombstones_before:  # nothing deleted
            try:
                self._build_vectors(store, vectors, adopted)  # every adopted vector was read back
                built = True
            except Exception:  # a GPU out of memory, say: FAISS catches up from SQLite below,
                log.exception("cold tier: building FAISS from the adopted vectors failed")
                kmeans = None  # with FAISS's own k-means (slower, but the load ends whole)
        self._spent("vectors", began)
        failed: Exception | None = None
        try:
            committing.result()
        except Exception as exc:
            failed = exc
        self._feeding = []  # all done (the commit ran after them): reported here, not by later writes
        if failed is not None:
            lexical.rollback()
        if failed is not None or (not built and store.version() != self._version_before):
            began = time.perf_counter()
            # a re-run that wrote nothing skips it; into a non-empty tier, the load's k-means
            # trains FAISS's lists when the store outgrew them (else the CPU's took minutes at 1M)
            self._catch_up(store, lexical, vectors, kmeans, True)  # regrow
            self._spent("vectors", began)
        self._feed_failed = None  # tantivy caught up: other writes may go on
        return failed

    def _stop_checkpointer(self) -> None:
        """The WAL's last checkpoint done; the writer checkpoints by itself again (under
        ``write_lock``, or once nothing else writes)."""
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            checkpointer.close()
            self._add("checkpoint", checkpointer.seconds)
            self._add("adopt_wal_wait", checkpointer.writer_seconds)

    def _vectors_mark(self, store: Store) -> int:
        """The version FAISS holds every change up to, as saved: during a bulk load it has not
        had the adopted rows yet (its end builds or catches up), so the version before it."""
        return self._version_before if self._bulk else store.version()

    def _fed(self, before: Future[None]) -> bool:
        """Wait for the feeds queued before the future ``before``; whether they all succeeded."""
        ok = True
        for future in self._feeding:
            if future is before:
                break
            try:
                future.result()
            except Exception:
                ok = False  # raised by the commit queued after it (``_commit_fed``)
        return ok

    def _build_vectors(
        self, store: Store, vectors: VectorIndex, adopted: list[tuple[np.ndarray[Any, Any], Vector]]
    ) -> None:
        """FAISS anew from the vectors adopted into an empty tier, and saved."""
        seqs = np.concatenate([s for s, _ in adopted])
        vecs = np.concatenate([v for _, v in adopted])
        if len(seqs) > 1 and not bool(np.all(seqs[1:] > seqs[:-1])):  # a seq adopted twice
            seqs, first = np.unique(seqs[::-1], return_index=True)  # its last copy
            vecs = vecs[::-1][first]
        for step, seconds in vectors.build(seqs, vecs, self._kmeans).items():
            self._add(f"vectors_{step}", seconds)
        saving = time.perf_counter()
        vectors.save(store.version())
        self._spent("vectors_save", saving)
