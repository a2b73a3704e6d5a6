"""What every command shares: the Typer app, logging, one-line errors, and finding the data's owner."""

from __future__ import annotations

import logging
import os
import time
import unicodedata
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.console import Console

from rag_router.cli.group import RootGroup, fail, help_types
from rag_router.owner import current_owner, user_server
from rag_router.settings import Settings

if TYPE_CHECKING:  # the engines, the model and the web app load in the commands that use them:
    # `rag-router --help` and the commands that only talk to a server start in a fraction of a second
    from rag_router.client import Client
    from rag_router.services import Services

help_types()
app = typer.Typer(
    cls=RootGroup, add_completion=False, no_args_is_help=True, help="Hybrid RAG retrieval service."
)
console = Console(stderr=True)

START_WAIT_S = 30.0  # how long a command waits for a server that is still starting


def setup_logging(settings: Settings, *, command: bool = True) -> None:
    """A command's output is its report: INFO lines only when RAG_LOG_LEVEL asks for them."""
    level = settings.log_level if not command or "RAG_LOG_LEVEL" in os.environ else "WARNING"
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # faiss.loader says at INFO which CPU build it loaded ("Could not load library with AVX512
    # support" on every start of a machine without it): nothing a user acts on
    for noisy in ("httpx", "sentence_transformers", "transformers", "faiss.loader"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _first_plain_key(settings: Settings) -> str | None:
    """The first key of RAG_API_KEYS given in plain text (its tenant's), if any."""
    for entry in settings.api_keys:
        value = entry.get_secret_value()
        if "sha256:" not in value:
            return value.rpartition(":")[2]
    return None


def _api_key(settings: Settings) -> str | None:
    if settings.api_key is not None:
        return settings.api_key.get_secret_value()
    return None


def _local_url(url: str) -> str:
    """A server bound to every interface is reached on this machine's loopback."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        netloc = f"127.0.0.1:{parts.port}" if parts.port else "127.0.0.1"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return url


def server_url(settings: Settings, url: str | None = None, *, others: bool = True) -> str | None:
    """The server a command goes through: ``--url``/``RAG_URL``, else the data dir's owner, else
    (with ``others``) a server this user runs on another data dir, else None.

    An owner that does not answer within ``START_WAIT_S`` (still loading, or hung) is an error:
    its store is locked, so opening it here would fail anyway.
    """
    explicit = url or settings.url
    if explicit:
        if not _answers(explicit, wait_s=0):
            fail(f"no rag-router answers at {explicit} (from --url or RAG_URL)")
        return explicit
    owner = current_owner(settings.data_dir)
    if owner is None:
        return _users_server(settings) if others else None
    found = _local_url(owner.url)
    if not _answers(
        found, wait_s=START_WAIT_S, while_alive=lambda: current_owner(settings.data_dir) is not None
    ):
        fail(
            f"the data dir {settings.data_dir} is held by `rag-router serve` (pid {owner.pid}), "
            f"which does not answer at {found}; wait for it to start, or stop it"
        )
    return found


def _users_server(settings: Settings) -> str | None:
    """The server this user runs elsewhere, for a command whose data dir was not chosen (no
    RAG_DATA_DIR, no .env) and holds no index here: one store whatever the folder. Said on stderr."""
    if "data_dir" in settings.model_fields_set or _index_here(settings):
        return None
    running = user_server()
    if running is None:
        return None
    owner, data_dir = running
    found = _local_url(owner.url)
    if not _answers(found, wait_s=START_WAIT_S, while_alive=lambda: user_server() is not None):
        return None
    console.print(
        f"[dim]using the running server at {found} (data dir {data_dir}); "
        "RAG_DATA_DIR or RAG_URL chooses another store[/dim]",
        highlight=False,
        soft_wrap=True,
    )
    return found


def new_store_check(settings: Settings, paths: Sequence[Path], *, allowed: bool) -> None:
    """Before an ingest opens the store in this process: say on stderr which data dir it writes,
    and never create one unasked inside a folder being ingested (``cd ~/docs && rag-router ingest
    .`` would bury a second store among the documents): that needs RAG_DATA_DIR or ``allowed``."""
    data_dir = settings.data_dir.resolve()
    if _index_here(settings):
        console.print(f"[dim]writing to the store at {data_dir}[/dim]", highlight=False, soft_wrap=True)
        return
    chosen = "data_dir" in settings.model_fields_set
    inside = [p for p in paths if p.is_dir() and data_dir.is_relative_to(p.resolve())]
    if inside and not chosen and not allowed:
        fail(
            f"no store here and no server running: this would create a new store at {data_dir}, inside "
            f"{inside[0]} (the folder being ingested). Start `rag-router serve` elsewhere, set RAG_DATA_DIR "
            "to the store to use, or pass --new-store to create it there"
        )
    console.print(f"[dim]creating a new store at {data_dir}[/dim]", highlight=False, soft_wrap=True)


def _answers(url: str, *, wait_s: float, while_alive: Callable[[], bool] = lambda: True) -> bool:
    from rag_router.client import Client

    probe = Client.connect(url, timeout_s=5)
    deadline = time.monotonic() + wait_s
    try:
        while not probe.healthy():
            if time.monotonic() >= deadline or not while_alive():
                return False
            time.sleep(0.5)
        return True
    finally:
        probe.close()


@contextmanager
def api(settings: Settings, url: str | None = None) -> Iterator[Client]:
    """The API of the server that owns the data, or, with none, of the app run in this process."""
    import httpx

    from indexers.manifest import IndexMismatch
    from rag_router.client import Client

    found = server_url(settings, url)
    if found is None and not _index_here(settings):
        fail(
            f"there is no index at {settings.data_dir.resolve()} and no server running: start "
            "`rag-router serve` where your store is, set RAG_DATA_DIR to it, or ingest documents "
            "first with `rag-router ingest PATH`"
        )
    if found is not None:
        client = Client.connect(found, _api_key(settings))
        try:
            yield client
        finally:
            client.close()
        return
    from starlette.testclient import TestClient

    from rag_router.api.app import create_app

    headers = {}
    key = _api_key(settings) or _first_plain_key(settings)
    if key:  # the store is ours: speak as that key's tenant
        headers["Authorization"] = f"Bearer {key}"
    elif settings.api_keys or settings.api_keys_file:
        fail("the server's keys are hashed: set RAG_API_KEY to the key of the tenant to act as")
    # One command, one caller: a single query-lane session (a server runs 2 + 1 for concurrent
    # clients, each a copy of the model loaded again: about a second apiece on 2 busy cores).
    embedding = settings.embedding.model_copy(update={"query_workers": 1})
    settings = settings.model_copy(update={"embedding": embedding})
    with ExitStack() as stack:
        try:  # entering runs the app's startup: the store is opened here
            http = stack.enter_context(TestClient(create_app(settings), headers=headers))
        except IndexMismatch as exc:
            fail(str(exc))
        except Exception as exc:
            _locked(settings.data_dir, exc)
            raise
        yield Client(cast(httpx.Client, http))  # TestClient is an httpx.Client


def _index_here(settings: Settings) -> bool:
    """An index to open in this process: the embedded tiers wrote one into the data dir, or a tier
    is a server (its index lives there). Opening a data dir that has none would create it empty."""
    from indexers.manifest import index_exists

    return bool(settings.qdrant.url or settings.elastic.url) or index_exists(settings.data_dir)


def where(settings: Settings, url: str | None = None) -> str:
    """Where a command's index is, for a message: the server's URL, or the data dir's path."""
    owner = current_owner(settings.data_dir)
    found = url or settings.url or (owner.url if owner is not None else None)
    return f"the server at {found}" if found else str(settings.data_dir.resolve())


@asynccontextmanager
async def local_services(settings: Settings) -> AsyncIterator[Services]:
    """The store opened in this process (no server holds it)."""
    from indexers.manifest import IndexMismatch
    from rag_router.services import build_services

    owner = current_owner(settings.data_dir)
    if owner is not None:  # the embedded engines are single-process: say who holds them
        fail(owner.describe(settings.data_dir))
    try:
        services = await build_services(settings)
    except IndexMismatch as exc:  # a setting to change, not a bug: one line, no traceback
        fail(str(exc))
    except Exception as exc:
        _locked(settings.data_dir, exc)
        raise
    try:
        yield services
    finally:
        await services.close()


def _locked(data_dir: Path, exc: Exception) -> None:
    """Qdrant Edge's lock held by a process that left no ``serve.json``: one line, no traceback."""
    if "WouldBlock" in str(exc) or "lock" in str(exc).lower():
        fail(f"the data dir {data_dir} is open in another process ({exc}); stop it first")


def visible(text: str) -> str:
    """``text`` safe to print on a terminal: control and format characters (bidi overrides such as
    U+202E, escape sequences, zero-width marks) shown as ``\\uXXXX``; line breaks and tabs kept.
    A stored title or passage must not rewrite what the terminal shows around it."""
    return "".join(
        ch if ch in _KEPT or unicodedata.category(ch) not in ("Cc", "Cf") else f"\\u{ord(ch):04x}"
        for ch in text
    )


_KEPT = frozenset("\n\t\u200d\u00ad")  # line breaks, tabs; the zero-width joiner of emoji; soft hyphens
