"""Files and folders → Documents, lazily (memory stays flat whatever the corpus size).

Formats: BEIR ``corpus.jsonl[.gz]`` (``_id``, ``title``, ``text``, ``metadata``), any JSONL
(field names mapped by ``FieldMap``; other top-level scalars such as ``date`` join the
metadata), and one-document files read by ``indexers.ingest.formats``: ``.txt``, ``.md`` (front
matter → metadata), ``.html``, ``.pdf``. Folders are walked recursively, filtered by glob
patterns. A file or line that cannot be read becomes a ``LoadFailure`` with a reason; it
never stops the others. A one-document file's id is its path relative to what was named: the
folder (``reports/2024/q1.pdf``), the file's own folder for one file named alone (``q1.pdf``), or,
when several paths are named, their common parent folder (``a/readme.txt``, ``b/readme.txt``), so
equal names in different folders or formats do not collide. An id read twice in one ingest (two
records, or a record and a file) is a ``LoadFailure`` the second time: nothing read is silently
replaced by what follows it.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

import numpy as np

from indexers.ingest.formats import READERS, Unreadable, read_markdown
from indexers.records import DEFAULT_TENANT, Document, content_hash, id_problem

log = logging.getLogger(__name__)

JSONL_SUFFIXES = {".jsonl", ".jsonl.gz", ".ndjson"}
KNOWN_SUFFIXES = JSONL_SUFFIXES | set(READERS)
DEFAULT_MAX_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LoadFailure:
    source: str
    reason: str


@dataclass(frozen=True, slots=True)
class FieldMap:
    """Which JSONL keys hold a document's parts (BEIR's ``_id`` is always accepted as the id)."""

    id: str = "id"
    text: str = "text"
    title: str = "title"
    metadata: str = "metadata"

    def reserved(self) -> set[str]:
        return {self.id, "_id", self.text, self.title, self.metadata}


@dataclass(frozen=True, slots=True)
class LoadOptions:
    tenant: str = DEFAULT_TENANT
    include: Sequence[str] = ()  # glob patterns on the path relative to the folder; empty = all
    exclude: Sequence[str] = ()
    fields: FieldMap = FieldMap()
    max_bytes: int = DEFAULT_MAX_BYTES  # per one-document file and per JSONL line


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


def _matches(rel: str, patterns: Sequence[str]) -> bool:
    pure = PurePosixPath(rel)
    return any(pure.match(p) or fnmatch.fnmatch(rel, p) for p in patterns)


def id_roots(paths: Sequence[Path]) -> list[Path]:
    """The folder each named path's ids are relative to: one folder, itself; one file, its folder;
    several paths, their common parent (so ``a/readme.txt`` and ``b/readme.txt`` stay apart)."""
    if len(paths) == 1:
        only = paths[0]
        return [only if only.is_dir() else only.parent]
    common = Path(os.path.commonpath([_absolute(p.parent) for p in paths]))
    return [common] * len(paths)


def iter_files(paths: Iterable[Path], options: LoadOptions = LoadOptions()) -> Iterator[tuple[Path, Path]]:
    """(file, the folder its id is relative to): folders recursively, sorted, filtered."""
    named = list(paths)
    for path, root in zip(named, id_roots(named), strict=True):
        if not path.is_dir():
            yield path, root
            continue
        for file in sorted(path.rglob("*")):
            rel = file.relative_to(path).as_posix()
            if not file.is_file() or any(part.startswith(".") for part in file.relative_to(path).parts):
                continue
            if _suffix(file) not in KNOWN_SUFFIXES:
                continue
            if options.include and not _matches(rel, options.include):
                continue
            if options.exclude and _matches(rel, options.exclude):
                continue
            yield file, root


def load_paths(
    paths: Iterable[Path], tenant: str = DEFAULT_TENANT, options: LoadOptions | None = None
) -> Iterator[Document | LoadFailure]:
    """Every document under ``paths``; an id read a second time is a failure, not a replacement."""
    options = options or LoadOptions(tenant=tenant)
    seen = SeenIds()
    for path, root in iter_files(paths, options):
        for source, item in load_sourced(path, root, options):
            yield seen.first(item, source)


def load_any(path: Path, root: Path, options: LoadOptions) -> Iterator[Document | LoadFailure]:
    """One file of any known kind: a JSONL file's records, or the one document of the file."""
    return (item for _, item in load_sourced(path, root, options))


def load_sourced(
    path: Path, root: Path, options: LoadOptions
) -> Iterator[tuple[str, Document | LoadFailure]]:
    """``load_any``, each item with where it was read (``file`` or ``file:line``)."""
    suffix = _suffix(path)
    if suffix in JSONL_SUFFIXES:
        yield from _jsonl_sourced(path, options.tenant, options)
    elif suffix in READERS:
        yield str(path), load_file(path, root, options)
    else:
        known = ", ".join(sorted(KNOWN_SUFFIXES))
        reason = f"unsupported file type {suffix or '(none)'!r}; known: {known}"
        yield str(path), LoadFailure(str(path), reason)


class SeenIds:
    """The (tenant, id) pairs read so far in one ingest, at 8 bytes each (a 64-bit hash: a false
    repeat is about as likely as 1 in 10^6 at ten million ids), so memory stays nearly flat."""

    _FLUSH = 65_536  # recent hashes kept in a set before they join the sorted array

    def __init__(self) -> None:
        self._recent: set[int] = set()
        self._sorted = np.empty(0, dtype=np.uint64)

    def add(self, tenant: str, doc_id: str) -> bool:
        """Whether the pair is new (and now remembered)."""
        key = hashlib.blake2b(f"{tenant}\0{doc_id}".encode(), digest_size=8).digest()
        value = int.from_bytes(key, "little")
        if value in self._recent:
            return False
        at = int(np.searchsorted(self._sorted, np.uint64(value)))
        if at < len(self._sorted) and int(self._sorted[at]) == value:
            return False
        self._recent.add(value)
        if len(self._recent) >= self._FLUSH:
            fresh = np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent))
            self._sorted = np.union1d(self._sorted, fresh)
            self._recent.clear()
        return True

    def repeats(self, tenant: str, doc_id: str, hashed: bool) -> bool:
        """Whether the id was read before in this ingest (and now remembered). A ``hashed`` id,
        the content hash of the title and text (none was given), repeats only with the same text."""
        return not self.add(tenant, doc_id) and not hashed

    def first(self, item: Document | LoadFailure, source: str) -> Document | LoadFailure:
        """``item``, or a failure when its id was read before in this ingest."""
        if isinstance(item, LoadFailure) or not self.repeats(item.tenant, item.id, _hashed(item)):
            return item
        return LoadFailure(source, repeat_reason(item.id))


def repeat_reason(doc_id: str) -> str:
    return f"id {doc_id!r} was read earlier in this ingest; this copy is skipped"


def _hashed(doc: Document) -> bool:
    return doc.id == content_hash(doc.title or "", doc.text)


@dataclass(frozen=True, slots=True)
class Claim:
    """The id one item of a file takes, for a check of repeats before the item is ingested."""

    line: int  # the JSONL line; 0 for a one-document file
    source: str  # where it was read, as ``load_sourced`` names it
    doc_id: str | None  # None: the item fails to load, so it takes no id
    hashed: bool = False  # the id is the content hash of the item's text


def claims(path: Path, root: Path, options: LoadOptions) -> Iterator[Claim]:
    """The ids ``load_sourced`` would give ``path``'s items, as ``SeenIds.first`` sees them. JSONL
    and Markdown (whose front matter may name the id) are read by the loader itself; the other
    formats cannot name themselves, so a file that passes the size checks takes its relative name
    (read by the loader, a file without text would take no id: the one difference)."""
    suffix = _suffix(path)
    if suffix in JSONL_SUFFIXES:
        for number, source, item in _jsonl_numbered(path, options.tenant, options):
            yield _claim(number, source, item)
    elif READERS.get(suffix) is read_markdown:
        yield _claim(0, str(path), load_file(path, root, options))
    elif suffix in READERS:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        sized = 0 < size <= options.max_bytes
        yield Claim(0, str(path), relative_id(path, root) if sized else None)


def _claim(line: int, source: str, item: Document | LoadFailure) -> Claim:
    if isinstance(item, LoadFailure):
        return Claim(line, source, None)
    return Claim(line, source, item.id, _hashed(item))


def _open(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def load_jsonl(
    path: Path, tenant: str = DEFAULT_TENANT, options: LoadOptions = LoadOptions()
) -> Iterator[Document | LoadFailure]:
    return (item for _, item in _jsonl_sourced(path, tenant, options))


def _jsonl_sourced(
    path: Path, tenant: str, options: LoadOptions
) -> Iterator[tuple[str, Document | LoadFailure]]:
    return ((source, item) for _, source, item in _jsonl_numbered(path, tenant, options))


def _jsonl_numbered(
    path: Path, tenant: str, options: LoadOptions
) -> Iterator[tuple[int, str, Document | LoadFailure]]:
    number = 0
    try:
        with _open(path) as lines:
            for number, line in enumerate(lines, 1):
                source = f"{path}:{number}"
                if len(line) > options.max_bytes:
                    yield number, source, LoadFailure(source, f"line over {_mb(options.max_bytes)}")
                elif line.strip():
                    yield number, source, parse_record(line, source, tenant, options.fields)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        source = f"{path}:{number + 1}"
        yield number + 1, source, LoadFailure(source, f"cannot read: {exc}")


def parse_record(
    line: str, source: str, tenant: str = DEFAULT_TENANT, fields: FieldMap = FieldMap()
) -> Document | LoadFailure:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        return LoadFailure(source, f"not JSON: {exc.msg}")
    if not isinstance(record, dict):
        return LoadFailure(source, "a JSON object was expected")
    return document_from_record(record, source, tenant, fields)


def document_from_record(
    record: dict[str, Any], source: str, tenant: str = DEFAULT_TENANT, fields: FieldMap = FieldMap()
) -> Document | LoadFailure:
    text = record.get(fields.text)
    title = record.get(fields.title) or None
    metadata = record.get(fields.metadata) or {}
    if not isinstance(text, str) or not isinstance(metadata, dict):
        return LoadFailure(source, f"{fields.text!r} must be a string and {fields.metadata!r} an object")
    if title is not None and not isinstance(title, str):
        return LoadFailure(source, f"{fields.title!r} must be a string")
    if not text.strip() and not title:
        return LoadFailure(source, "empty document")
    extra = {
        k: v
        for k, v in record.items()
        if k not in fields.reserved() and isinstance(v, str | int | float | bool | list)
    }
    doc_id = record.get(fields.id, record.get("_id"))
    doc_id = str(doc_id) if doc_id not in (None, "") else content_hash(title or "", text)
    if (problem := id_problem(doc_id)) is not None:
        return LoadFailure(source, problem)
    return Document(id=doc_id, text=text, title=title, metadata={**extra, **metadata}, tenant=tenant)


def load_file(path: Path, root: Path, options: LoadOptions = LoadOptions()) -> Document | LoadFailure:
    """One file, one document: size-checked before it is read."""
    try:
        size = path.stat().st_size
        if size > options.max_bytes:
            return LoadFailure(str(path), f"file is {_mb(size)}, over the {_mb(options.max_bytes)} limit")
        if size == 0:
            return LoadFailure(str(path), "empty file")
        parsed = READERS[_suffix(path)](path.read_bytes())
    except Unreadable as exc:
        return LoadFailure(str(path), str(exc))
    except OSError as exc:
        return LoadFailure(str(path), f"cannot read: {exc}")
    if not parsed.text.strip():
        return LoadFailure(str(path), "no text in the file")
    doc_id = str(parsed.metadata.pop("id", "") or relative_id(path, root))
    if (problem := id_problem(doc_id)) is not None:
        return LoadFailure(str(path), problem)
    metadata = {"source": path.name, **parsed.metadata}
    return Document(
        id=doc_id,
        text=parsed.text,
        title=parsed.title,
        metadata=metadata,
        tenant=options.tenant,
        page_starts=parsed.page_starts,
    )


def relative_id(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` (either may be relative to the working folder), ``/``-separated."""
    try:
        rel = _absolute(path).relative_to(_absolute(root))
    except ValueError:
        rel = Path(path.name)
    return rel.as_posix()


def _absolute(path: Path) -> Path:
    """Absolute and without ``..`` (lexically: a link inside a folder keeps its name there)."""
    return Path(os.path.normpath(path.absolute()))


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB"
