"""Free space on the data dir's file system, checked before writing.

The embedded engines write through memory-mapped files (Qdrant Edge's segments and payload
indexes, several MB each): when the file system cannot back a page the process dies of SIGBUS,
with no exception to catch. So writes are refused while free space is under a floor
(``DiskGuard``), like Elasticsearch's flood-stage watermark; the floor is set well above what one
write or one shard build adds. What still fails for lack of space (a SQLite or tantivy write)
raises ``DiskFull`` too (``disk_full`` recognises it), and the write is not acknowledged.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from indexers.tiers.base import TierError

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_NO_SPACE_TEXT = ("no space left on device", "database or disk is full", "disk quota exceeded")


class DiskFull(TierError):
    """Not enough free space to write: nothing of the write was acknowledged."""

    def __init__(self, message: str, free_bytes: int | None = None) -> None:
        super().__init__(message)
        self.free_bytes = free_bytes


@dataclass(frozen=True, slots=True)
class DiskGuard:
    path: Path
    min_free_bytes: int

    def free_bytes(self) -> int:
        probe = self.path
        while not probe.exists() and probe != probe.parent:  # before the data dir is made
            probe = probe.parent
        return shutil.disk_usage(probe).free

    def low(self) -> bool:
        return self.min_free_bytes > 0 and self.free_bytes() < self.min_free_bytes

    def check(self) -> None:
        """Raise ``DiskFull`` while free space is under the floor."""
        if self.min_free_bytes <= 0:
            return
        free = self.free_bytes()
        if free < self.min_free_bytes:
            raise DiskFull(
                f"the data dir's file system has {free / 2**20:.0f} MiB free, under the "
                f"{self.min_free_bytes / 2**20:.0f} MiB kept free (RAG_STORAGE__MIN_FREE_MB): writes are "
                "refused until space is freed; searches still work",
                free,
            )


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a write that failed for lack of space."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, DiskFull):
            return True
        if isinstance(cur, OSError) and cur.errno in _NO_SPACE:
            return True
        if isinstance(cur, (sqlite3.Error, OSError, RuntimeError, ValueError, TierError)):
            text = str(cur).lower()
            if any(t in text for t in _NO_SPACE_TEXT):
                return True
        cur = cur.__cause__ or cur.__context__
    return False
