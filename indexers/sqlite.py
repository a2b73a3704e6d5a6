"""Opening the SQLite files the storage layer keeps (cold tier, job ledger, embedding cache)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal


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
