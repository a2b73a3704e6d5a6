"""API keys: held as SHA-256 digests, compared in constant time, re-read from their file when it
changes (rotation without a restart), and rate-limited per key.

An entry is ``key`` (the default tenant), ``tenant:key``, or either with the key already hashed:
``sha256:<64 hex>`` / ``tenant:sha256:<64 hex>`` (``rag-router hash-key`` prints one). Entries
come from ``RAG_API_KEYS`` and from ``RAG_API_KEYS_FILE`` (one a line, ``#`` comments). Plain
keys are hashed when read and not kept. API keys are random tokens, not passwords, so a fast
hash is the right one (as GitHub and Stripe do): the digest only has to be one-way.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from limits import RateLimitItem, parse_many
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

log = logging.getLogger(__name__)

_HASHED = re.compile(r"^(?:(?P<tenant>.*):)?sha256:(?P<hex>[0-9a-fA-F]{64})$")


def hash_key(key: str) -> str:
    """What to store instead of ``key``: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Key:
    tenant: str
    digest: bytes

    @property
    def label(self) -> str:
        """How logs and metrics name the key: its tenant and the digest's first 8 hex digits."""
        return f"{self.tenant}/{self.digest.hex()[:8]}"


def parse_entry(raw: str) -> Key:
    entry = raw.strip()
    hashed = _HASHED.match(entry)
    if hashed:
        return Key(hashed["tenant"] or "default", bytes.fromhex(hashed["hex"]))
    if "sha256:" in entry:  # meant as a digest, but not one: refuse rather than take it as a key
        raise ValueError("an API key entry with sha256: must end in 64 hex digits")
    tenant, _, key = entry.rpartition(":")
    if not key:
        raise ValueError("an API key entry has an empty key")
    return Key(tenant or "default", hashlib.sha256(key.encode()).digest())


class KeyRing:
    """The keys a request may present. ``file`` is checked for changes every ``recheck_s``."""

    def __init__(
        self,
        entries: Iterable[str],
        file: Path | None = None,
        rate_limit: str | None = None,
        recheck_s: float = 1.0,
    ) -> None:
        self._recheck_s = recheck_s
        self._fixed = [parse_entry(e) for e in entries if e.strip()]
        self._file = file
        self._file_keys: list[Key] = []
        self._seen: tuple[float, int] | None = None
        self._checked = 0.0
        self._lock = threading.Lock()
        self._limits: list[RateLimitItem] = parse_many(rate_limit) if rate_limit else []
        self._limiter = MovingWindowRateLimiter(MemoryStorage()) if self._limits else None
        self._reload()

    @property
    def enabled(self) -> bool:
        return bool(self._fixed) or self._file is not None

    def find(self, presented: str) -> Key | None:
        """The key ``presented`` is, comparing its digest with every key's (constant time)."""
        self._maybe_reload()
        given = hashlib.sha256(presented.encode()).digest()
        found = None
        for key in (*self._fixed, *self._file_keys):  # no early exit: the time says nothing
            if hmac.compare_digest(given, key.digest) and found is None:
                found = key
        return found

    def retry_after(self, key: Key) -> int | None:
        """None when ``key`` may make this request; else the seconds until it may."""
        if self._limiter is None:
            return None
        name = key.digest.hex()
        for item in self._limits:
            if not self._limiter.hit(item, name):
                reset = self._limiter.get_window_stats(item, name).reset_time
                return max(1, math.ceil(reset - time.time()))
        return None

    def _maybe_reload(self) -> None:
        if self._file is not None and time.monotonic() - self._checked >= self._recheck_s:
            self._reload()

    def _reload(self) -> None:
        if self._file is None:
            return
        with self._lock:
            self._checked = time.monotonic()
            try:
                stat = self._file.stat()
                seen = (stat.st_mtime, stat.st_size)
                if seen == self._seen:
                    return
                lines = self._file.read_text(encoding="utf-8").splitlines()
                keys = [
                    parse_entry(line) for line in lines if line.strip() and not line.lstrip().startswith("#")
                ]
            except (OSError, ValueError) as exc:  # keep the keys we have: a half-written file
                log.error(
                    "API keys file %s not read (%s); keeping the %d keys from before",
                    self._file,
                    type(exc).__name__,
                    len(self._file_keys),
                )
                return
            self._file_keys, self._seen = keys, seen
            log.info("API keys file %s read: %d keys", self._file, len(keys))
