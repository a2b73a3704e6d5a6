"""Opening the SQLite files the storage layer keeps (cold tier, job ledger, embedding cache)."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)


def connect(
    path: Path,
    *,
    synchronous: Literal["FULL", "NORMAL"] = "FULL",
    shared: bool = True,
    page_size: int | None = None,
) -> sqlite3.Connection:
    """Autocommit (explicit BEGIN), WAL, 30 s busy timeout. ``shared``: usable from any thread,
    the caller serialising access; ``synchronous=NORMAL`` only where losing the tail costs time.
    ``page_size`` applies to a new file only (SQLite fixes it when the first table is made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=not shared)
    if page_size is not None:
        conn.execute(f"PRAGMA page_size={int(page_size)}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn


class Checkpointer:
    """WAL checkpoints in a thread of their own while one connection writes in bulk.

    SQLite checkpoints from inside the COMMIT that takes the WAL past ``wal_autocheckpoint``
    pages: the writer itself copies those pages into the database file and syncs it, and
    meanwhile writes nothing. For a bulk writer (the cold tier's owner adopting segments) that
    copy, a second write of every byte, is the writer's own time. Here the writer's automatic
    checkpoints are off and this thread, on its own connection, runs a PASSIVE checkpoint
    after each commit it is told of (``committed``): it copies what is committed while the
    writer builds its next transaction, and never blocks it.

    The WAL starts over (from its first byte, in place) when a transaction begins with every
    frame copied. A bulk writer that waits for its input between transactions gives the thread
    time to catch up; one that never waits would grow the file by everything written, as a
    PASSIVE checkpoint finds the writer in its next transaction. So the writer says when it is
    about to write (``writing``): past ``wal_limit`` bytes, it first waits for the thread's copy
    of every commit, and the file stays within about ``wal_limit`` plus one transaction. (Once
    the writer ran a TRUNCATE checkpoint itself after each commit past the limit: in a
    2M-chunk load on the H200 machine that was 8.8 s of the owner's time; docs/benchmarks.md.)
    Readers holding an old snapshot keep the WAL from starting over; it grows until they let
    go. The last checkpoint (``stop``) truncates the file. Nothing changes for durability: a
    committed transaction is in the WAL (synced at COMMIT) until a checkpoint copies it.
    """

    def __init__(
        self,
        writer: sqlite3.Connection,
        path: Path,
        *,
        wal_limit: int,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
    ) -> None:
        self._writer = writer
        self._path = path
        self._wal = path.with_name(path.name + "-wal")
        self._wal_limit = wal_limit
        self._synchronous: Literal["FULL", "NORMAL"] = synchronous
        self._turn = threading.Condition()
        self._asked = 0  # commits told of (``committed``)
        self._copied = 0  # of those, how many the last finished checkpoint covered
        self._running = True  # the thread is up (False: it could not connect, or it ended)
        self._stopping = False
        self.seconds = 0.0  # the thread busy checkpointing
        self.writer_seconds = 0.0  # the writer waiting for the thread at the WAL's limit
        self._autocheckpoint = int(writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        writer.execute("PRAGMA wal_autocheckpoint=0")
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """The writer committed: the thread copies what it wrote."""
        with self._turn:
            self._asked += 1
            self._turn.notify_all()

    def writing(self) -> None:
        """The writer is about to begin a transaction (call it from the writer's thread, outside
        a transaction): past the WAL's limit it waits for the thread's copy of every commit, so
        that this transaction starts the WAL over."""
        try:
            size = self._wal.stat().st_size
        except FileNotFoundError:
            return
        if size <= self._wal_limit:
            return
        began = time.perf_counter()
        with self._turn:
            while self._running and self._copied < self._asked:
                self._turn.wait()
            alone = not self._running
        if alone:  # no thread: the writer copies the WAL itself
            _checkpoint(self._writer, "TRUNCATE", self._path)
        self.writer_seconds += time.perf_counter() - began

    def _run(self) -> None:
        try:
            conn = connect(self._path, synchronous=self._synchronous, shared=False)
        except sqlite3.Error:  # the writer checkpoints at the WAL's limit itself (``writing``)
            log.exception("sqlite: no checkpoint thread for %s", self._path)
            self._ended()
            return
        try:
            while True:
                with self._turn:
                    while self._copied == self._asked and not self._stopping:
                        self._turn.wait()
                    ticket, last = self._asked, self._stopping  # this checkpoint covers those
                began = time.perf_counter()
                _checkpoint(conn, "TRUNCATE" if last else "PASSIVE", self._path)
                self.seconds += time.perf_counter() - began
                with self._turn:
                    self._copied = ticket
                    self._turn.notify_all()
                if last:
                    return
        finally:
            conn.close()
            self._ended()

    def _ended(self) -> None:
        with self._turn:
            self._running = False
            self._turn.notify_all()

    def stop(self) -> None:
        """Start the last checkpoint (of everything committed so far) without waiting for it."""
        with self._turn:
            self._stopping = True
            self._turn.notify_all()

    def close(self) -> None:
        """The last checkpoint done, the writer checkpoints by itself again (call it from the
        writer's thread, or under the lock that serialises the writer)."""
        self.stop()
        self._thread.join()
        self._writer.execute(f"PRAGMA wal_autocheckpoint={self._autocheckpoint}")


def _checkpoint(conn: sqlite3.Connection, mode: str, path: Path) -> None:
    try:
        busy = conn.execute(f"PRAGMA main.wal_checkpoint({mode})").fetchone()[0]
    except sqlite3.Error:  # nothing lost: the WAL keeps it for the next checkpoint
        log.exception("sqlite: %s checkpoint of %s failed", mode, path)
        return
    if busy:  # readers held on past the busy timeout: the next one tries again
        log.warning("sqlite: %s checkpoint of %s could not finish (busy)", mode, path)
