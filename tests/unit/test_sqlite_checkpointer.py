"""WAL checkpoints in a thread of their own while one connection writes in bulk."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from indexers import sqlite as sqlite_module
from indexers.sqlite import Checkpointer, connect

ROW = b"x" * 2000


def _write(conn: sqlite3.Connection, rows: int, start: int = 0) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, ROW) for i in range(start, start + rows)])
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


def _wal_size(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def _table(path: Path) -> sqlite3.Connection:
    writer = connect(path, page_size=4096)
    writer.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
    return writer


def test_the_thread_copies_each_commit_while_the_writer_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "bulk.sqlite"
    writer = _table(path)
    checkpointer = Checkpointer(writer, path, wal_limit=1 << 30)
    assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0  # the thread does it
    for i in range(5):  # ~2.5k pages: past the 1,000 at which the writer would checkpoint itself
        _write(writer, 1000, i * 1000)
        checkpointer.committed()
    deadline = time.monotonic() + 60  # the thread's copy, before any stop
    while _in_file(path) < 1.0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _in_file(path) == 1.0  # every committed page is in the database file
    assert _wal_size(path) > 0  # copied by PASSIVE checkpoints: the WAL was not truncated
    checkpointer.close()
    assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    assert _wal_size(path) == 0  # the last checkpoint truncates it
    assert writer.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 5000
    writer.close()


def test_past_its_limit_the_wal_starts_over_in_place(tmp_path: Path) -> None:
    """A writer that never pauses: without the limit, PASSIVE checkpoints would find it in its
    next transaction every time and the WAL would hold everything written (20 MB here)."""
    path = tmp_path / "bulk.sqlite"
    writer = _table(path)
    limit = 1_000_000
    checkpointer = Checkpointer(writer, path, wal_limit=limit)
    sizes = []
    for i in range(10):  # each transaction ~2 MB of WAL, past the limit alone
        checkpointer.writing()  # past the limit: every frame is copied when it returns
        if i:
            assert _in_file(path) == 1.0
            assert _wal_size(path) == sizes[-1]  # not cut: this transaction writes it over
        _write(writer, 1000, i * 1000)
        sizes.append(_wal_size(path))
        checkpointer.committed()
    one = sizes[0]  # one transaction's frames
    assert one > limit
    assert max(sizes) <= one + 65_536  # each transaction wrote the WAL from its start again
    assert checkpointer.writer_seconds > 0
    checkpointer.close()
    assert _wal_size(path) == 0  # the last checkpoint truncates it
    assert writer.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 10_000
    writer.close()


def test_with_no_thread_the_writer_bounds_the_wal_itself(tmp_path: Path, monkeypatch: Any) -> None:
    """If the thread cannot open its connection, the writer checkpoints at the limit itself."""
    path = tmp_path / "bulk.sqlite"
    writer = _table(path)

    def refused(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(sqlite_module, "connect", refused)
    checkpointer = Checkpointer(writer, path, wal_limit=1_000_000)
    for i in range(3):
        _write(writer, 1000, i * 1000)
        checkpointer.committed()
        checkpointer.writing()
        assert _wal_size(path) == 0  # truncated by the writer
    checkpointer.close()
    assert writer.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 3000
    writer.close()


def test_without_its_thread_the_writer_checkpoints_nothing_when_turned_off(tmp_path: Path) -> None:
    """The control for the tests above: with automatic checkpoints off and no thread, the WAL's
    frames stay uncopied, so the copies seen above are the thread's."""
    path = tmp_path / "bulk.sqlite"
    writer = _table(path)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    _write(writer, 5000)
    assert _in_file(path) < 0.5  # most pages are in the WAL only
    writer.close()
