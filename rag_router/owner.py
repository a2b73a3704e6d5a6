"""Who holds a data dir: ``rag-router serve`` says so in ``serve.json`` (its pid and URL).

The embedded engines are single-process (Qdrant Edge locks its write-ahead log), so a CLI
command that opens the store while a server holds it cannot proceed. It reads this file first
and stops with one line naming the server and what to do instead; a file whose process is gone
is stale and ignored.

The server also writes the same record, with its data dir, to a per-user file
(``$XDG_STATE_HOME/rag-router/server.json``, else ``~/.local/state/…``): a command run from
another folder, with no data dir of its own configured, finds the running server there instead
of opening (or creating) a second store in that folder (``user_server``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

log = logging.getLogger(__name__)

OWNER_FILE = "serve.json"
USER_FILE = "server.json"


@dataclass(frozen=True, slots=True)
class Owner:
    pid: int
    url: str

    def describe(self, data_dir: Path) -> str:
        return (
            f"the data dir {data_dir} is held by `rag-router serve` (pid {self.pid}, {self.url}); "
            f"send documents and queries to its API (POST {self.url}/v1/documents, /v1/search), "
            "or stop it first"
        )


def current_owner(data_dir: Path) -> Owner | None:
    """The live server holding ``data_dir``, or None (none, or it died without cleaning up)."""
    try:
        raw = json.loads((data_dir / OWNER_FILE).read_text(encoding="utf-8"))
        owner = Owner(int(raw["pid"]), str(raw["url"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if owner.pid == os.getpid() or not _alive(owner.pid):
        return None
    return owner


@contextlib.contextmanager
def holding(data_dir: Path, url: str) -> Iterator[None]:
    """Say that this process serves ``data_dir`` at ``url`` while the block runs.

    The file goes when the block ends, SIGTERM included: uvicorn shuts down gracefully on it, then
    puts back the handler it found and raises the signal again; with Python's default handler
    that kills the process before any ``finally`` runs, so while the block runs SIGTERM raises
    ``SystemExit`` (status 143, as the signal would give) and the cleanup below runs.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    record = {"pid": os.getpid(), "url": url, "data_dir": str(data_dir.resolve())}
    paths = [data_dir / OWNER_FILE, user_file()]
    _write(paths[0], record)
    try:
        _write(paths[1], record)
    except OSError as exc:  # the per-user file is a convenience: never fatal
        log.warning(
            "could not write %s (%s): commands from other folders will not find this server", paths[1], exc
        )
    try:
        with _exit_on_sigterm():
            yield
    finally:
        for path in paths:
            with contextlib.suppress(OSError, ValueError):
                if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
                    path.unlink()


def _write(path: Path, record: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
    tmp.replace(path)


def user_file() -> Path:
    """This user's record of the server last started (``$XDG_STATE_HOME/rag-router/server.json``)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "rag-router" / USER_FILE


def user_server() -> tuple[Owner, Path] | None:
    """The live server this user started last, and its data dir; None when there is none."""
    try:
        raw = json.loads(user_file().read_text(encoding="utf-8"))
        owner, data_dir = Owner(int(raw["pid"]), str(raw["url"])), Path(str(raw["data_dir"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if owner.pid == os.getpid() or not _alive(owner.pid):
        return None
    return owner, data_dir


@contextlib.contextmanager
def _exit_on_sigterm() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():  # signals are the main thread's
        yield
        return

    def exit_143(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, exit_143)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True
