"""WAL checkpoints in a thread of their own while one connection writes in bulk."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from indexers.sqlite import Checkpointer, connect


def _write(conn: sqlite3.Connection, rows: int, start: int = 0) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, b"x" * 2000) for i in range(start, start + rows)])
    conn.execute("COMMIT")


def _in_file(path: Path) -> float:
    """The share of the database's pages (as a reader sees them, WAL included) that are in the
    database file itself: copied there by a checkpoint."""
    conn = sqlite3.connect(path)
    try:
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
    finally:
        conn.close()
    return path.stat().st_size / (pages * 4096)


def _table(path: Path) -> sqlite3.Connection:
    writer = connect(path, page_size=4096)
    writer.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
    writer.execute("PRAGMA wal_autocheckpoint=0")  # what the writer leaves behind is visible below
    writer.execute("PRAGMA wal_autocheckpoint=1000")
    return writer


def test_the_writer_stops_checkpointing_and_the_thread_copies_what_it_committed(tmp_path: Path) -> None:
    path = tmp_path / "bulk.sqlite"
    writer = _table(path)
    checkpointer = Checkpointer(writer, path)
    assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    for i in range(5):  # ~2.5k pages: past the 1,000 at which the writer would checkpoint itself
        _write(writer, 1000, i * 1000)
        checkpointer.committed()
    checkpointer.close()  # the last checkpoint done
    assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    assert _in_file(path) == 1.0  # every committed page is in the database file
    assert writer.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 5000
    writer.close()


def test_without_its_thread_the_writer_checkpoints_nothing_when_turned_off(tmp_path: Path) -> None:
    """The control for the test above: with automatic checkpoints off and no thread, the WAL's
    frames stay uncopied, so the copies seen above are the thread's."""
    path = tmp_path / "bulk.sqlite"
    writer = _table(path)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    _write(writer, 5000)
    assert _in_file(path) < 0.5  # most pages are in the WAL only
    writer.close()
