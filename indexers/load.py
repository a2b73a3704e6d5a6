"""Files → Documents.

Formats: BEIR ``corpus.jsonl[.gz]`` (``_id``, ``title``, ``text``, ``metadata``), any JSONL
with ``id``/``text``/``title``/``metadata``, ``.txt`` and ``.md`` (title from the first
heading). A file or line that cannot be read becomes a ``LoadFailure`` with a reason; it
never stops the others.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from indexers.documents import DEFAULT_TENANT, Document, content_hash

log = logging.getLogger(__name__)

TEXT_SUFFIXES = {".txt", ".md", ".markdown"}
JSONL_SUFFIXES = {".jsonl", ".jsonl.gz", ".ndjson"}


@dataclass(frozen=True, slots=True)
class LoadFailure:
    source: str
    reason: str


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


def iter_files(paths: Iterable[Path]) -> Iterator[Path]:
    """Files under the given paths (folders recursively, sorted) that a loader understands."""
    for path in paths:
        if path.is_dir():
            yield from (p for p in sorted(path.rglob("*")) if p.is_file() and _known(p))
        else:
            yield path


def _known(path: Path) -> bool:
    return _suffix(path) in TEXT_SUFFIXES | JSONL_SUFFIXES and not path.name.startswith(".")


def load_paths(paths: Iterable[Path], tenant: str = DEFAULT_TENANT) -> Iterator[Document | LoadFailure]:
    for path in iter_files(paths):
        suffix = _suffix(path)
        if suffix in JSONL_SUFFIXES:
            yield from load_jsonl(path, tenant)
        elif suffix in TEXT_SUFFIXES:
            yield load_text(path, tenant)
        else:
            yield LoadFailure(str(path), f"unsupported file type {suffix!r}")


def _open(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def load_jsonl(path: Path, tenant: str = DEFAULT_TENANT) -> Iterator[Document | LoadFailure]:
    try:
        with _open(path) as lines:
            for number, line in enumerate(lines, 1):
                if line.strip():
                    yield parse_record(line, f"{path}:{number}", tenant)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        yield LoadFailure(str(path), f"cannot read: {exc}")


def parse_record(line: str, source: str, tenant: str = DEFAULT_TENANT) -> Document | LoadFailure:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        return LoadFailure(source, f"not JSON: {exc.msg}")
    if not isinstance(record, dict):
        return LoadFailure(source, "a JSON object was expected")
    return document_from_record(record, source, tenant)


def document_from_record(
    record: dict[str, Any], source: str, tenant: str = DEFAULT_TENANT
) -> Document | LoadFailure:
    text = record.get("text")
    title = record.get("title") or None
    metadata = record.get("metadata") or {}
    if not isinstance(text, str) or not isinstance(metadata, dict):
        return LoadFailure(source, "'text' must be a string and 'metadata' an object")
    if not text.strip() and not title:
        return LoadFailure(source, "empty document")
    doc_id = record.get("_id", record.get("id"))
    doc_id = str(doc_id) if doc_id not in (None, "") else content_hash(title or "", text)
    return Document(id=doc_id, text=text, title=title, metadata=metadata, tenant=tenant)


def load_text(path: Path, tenant: str = DEFAULT_TENANT) -> Document | LoadFailure:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return LoadFailure(str(path), f"cannot read: {exc}")
    if not text.strip():
        return LoadFailure(str(path), "empty file")
    title = None
    first = text.lstrip().splitlines()[0]
    if _suffix(path) != ".txt" and first.startswith("#"):
        title = first.lstrip("#").strip()
        text = text.lstrip()[len(first) :].lstrip()
    return Document(id=path.stem, text=text, title=title, metadata={"source": path.name}, tenant=tenant)
