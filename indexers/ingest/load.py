"""Files and folders → Documents, lazily (memory stays flat whatever the corpus size).

Formats: BEIR ``corpus.jsonl[.gz]`` (``_id``, ``title``, ``text``, ``metadata``), any JSONL
(field names mapped by ``FieldMap``; other top-level scalars such as ``date`` join the
metadata), and one-document files read by ``indexers.ingest.formats``: ``.txt``, ``.md`` (front
matter → metadata), ``.html``, ``.pdf``. Folders are walked recursively, filtered by glob
patterns. A file or line that cannot be read becomes a ``LoadFailure`` with a reason; it
never stops the others. A one-document file's id is its path relative to the folder given
(``reports/2024/q1.pdf``), so equal names in different folders or formats do not collide.
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from indexers.ingest.formats import READERS, Unreadable
from indexers.records import DEFAULT_TENANT, Document, content_hash

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


def iter_files(paths: Iterable[Path], options: LoadOptions = LoadOptions()) -> Iterator[tuple[Path, Path]]:
    """(file, the folder its id is relative to): folders recursively, sorted, filtered."""
    for path in paths:
        if not path.is_dir():
            yield path, path.parent
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
            yield file, path


def load_paths(
    paths: Iterable[Path], tenant: str = DEFAULT_TENANT, options: LoadOptions | None = None
) -> Iterator[Document | LoadFailure]:
    options = options or LoadOptions(tenant=tenant)
    for path, root in iter_files(paths, options):
        yield from load_any(path, root, options)


def load_any(path: Path, root: Path, options: LoadOptions) -> Iterator[Document | LoadFailure]:
    """One file of any known kind: a JSONL file's records, or the one document of the file."""
    suffix = _suffix(path)
    if suffix in JSONL_SUFFIXES:
        yield from load_jsonl(path, options.tenant, options)
    elif suffix in READERS:
        yield load_file(path, root, options)
    else:
        known = ", ".join(sorted(KNOWN_SUFFIXES))
        yield LoadFailure(str(path), f"unsupported file type {suffix or '(none)'!r}; known: {known}")


def _open(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def load_jsonl(
    path: Path, tenant: str = DEFAULT_TENANT, options: LoadOptions = LoadOptions()
) -> Iterator[Document | LoadFailure]:
    number = 0
    try:
        with _open(path) as lines:
            for number, line in enumerate(lines, 1):
                if len(line) > options.max_bytes:
                    yield LoadFailure(f"{path}:{number}", f"line over {_mb(options.max_bytes)}")
                elif line.strip():
                    yield parse_record(line, f"{path}:{number}", tenant, options.fields)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        yield LoadFailure(f"{path}:{number + 1}", f"cannot read: {exc}")


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
    doc_id = str(parsed.metadata.pop("id", "") or _relative_id(path, root))
    metadata = {"source": path.name, **parsed.metadata}
    return Document(
        id=doc_id,
        text=parsed.text,
        title=parsed.title,
        metadata=metadata,
        tenant=options.tenant,
        page_starts=parsed.page_starts,
    )


def _relative_id(path: Path, root: Path) -> str:
    try:
        rel = path.relative_to(root)
    except ValueError:
        rel = Path(path.name)
    return rel.as_posix()


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB"
