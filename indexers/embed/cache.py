"""An on-disk cache of passage embeddings, keyed by model and text.

A chunk whose text is unchanged is not embedded again: not when its document's metadata
changed (the content hash the tiers compare covers metadata), not when it moves to the
other tier (``retier``), not when a tenant ingests a text another already did. SQLite (WAL);
bounded by entry count, oldest evicted first. Losing the cache costs only time, so it is
written with ``synchronous=NORMAL``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from indexers.records import Vector
from indexers.sqlite import connect

SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key BLOB NOT NULL UNIQUE,
    vector BLOB NOT NULL
);
"""
_EVICT_EVERY = 10_000  # puts between two size checks


class EmbeddingCache:
    def __init__(self, path: Path, *, model: str, dim: int, max_entries: int = 1_000_000) -> None:
        self._conn = connect(path, synchronous="NORMAL")
        self._conn.executescript(SCHEMA)
        self._lock = threading.Lock()
        self._model = model.encode()
        self._dim = dim
        self._max = max_entries
        self._since_evict = 0
        self.hits = 0
        self.misses = 0

    def _key(self, text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16, key=self._model[:64]).digest()

    def get_many(self, texts: Sequence[str]) -> dict[int, Vector]:
        """Index in ``texts`` → cached vector, for the texts that are cached."""
        keys = [self._key(t) for t in texts]
        found: dict[bytes, Vector] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = self._conn.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", part)
                found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        out = {i: found[k] for i, k in enumerate(keys) if k in found and found[k].shape[0] == self._dim}
        self.hits += len(out)
        self.misses += len(texts) - len(out)
        return out

    def put_many(self, texts: Sequence[str], vectors: Vector) -> None:
        rows = [
            (self._key(t), np.ascontiguousarray(v, dtype=np.float32).tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        with self._lock:
            self._conn.execute("BEGIN")
            self._conn.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", rows)
            self._conn.execute("COMMIT")
            self._since_evict += len(rows)
            if self._since_evict >= min(_EVICT_EVERY, max(1, self._max // 10)):
                self._evict()

    def _evict(self) -> None:
        self._since_evict = 0
        (count,) = self._conn.execute("SELECT COUNT(*) FROM vectors").fetchone()
        if count > self._max:
            self._conn.execute(
                "DELETE FROM vectors WHERE seq IN (SELECT seq FROM vectors ORDER BY seq LIMIT ?)",
                (count - self._max,),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
