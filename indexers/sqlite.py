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

    A PASSIVE checkpoint never lets the WAL start over (the writer is always in its next
    transaction by then), so the file would grow by everything written. Once it is past
    ``wal_limit`` bytes, ``committed`` (in the writer's thread, between transactions) runs a
    TRUNCATE checkpoint: it copies what the thread has not (about the last transaction), and
    the WAL starts over, empty. The last checkpoint (``stop``) truncates too. Nothing changes
    for durability: a committed transaction is in the WAL (synced at COMMIT) until a checkpoint
    copies it.
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
        self._wake = threading.Event()
        self._stopping = False
        self.seconds = 0.0  # the thread busy checkpointing
        self.writer_seconds = 0.0  # the writer's own TRUNCATE checkpoints
        self._autocheckpoint = int(writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        writer.execute("PRAGMA wal_autocheckpoint=0")
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """The writer committed: the thread copies what it wrote; past the WAL's limit, the
        writer truncates it now (call it from the writer's thread, outside a transaction)."""
        try:
            over = self._wal.stat().st_size > self._wal_limit
        except FileNotFoundError:
            over = False
        if over:
            began = time.perf_counter()
            _checkpoint(self._writer, "TRUNCATE", self._path)
            self.writer_seconds += time.perf_counter() - began
        self._wake.set()

    def _run(self) -> None:
        try:
            conn = connect(self._path, synchronous=self._synchronous, shared=False)
        except sqlite3.Error:  # the writer's TRUNCATE checkpoints still bound the WAL
            log.exception("sqlite: no checkpoint thread for %s", self._path)
            return
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                last = self._stopping  # read first: this checkpoint covers all before ``stop``
                began = time.perf_counter()
                _checkpoint(conn, "TRUNCATE" if last else "PASSIVE", self._path)
                self.seconds += time.perf_counter() - began
                if last:
                    return
        finally:
            conn.close()

    def stop(self) -> None:
        """Start the last checkpoint (of everything committed so far) without waiting for it."""
        self._stopping = True
        self._wake.set()

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
