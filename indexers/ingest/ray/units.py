"""The Ray engine's units of input: the input cut into pieces of about ``unit_mb`` (line-aligned
byte ranges of a JSONL file, groups of one-document files; a gzip file is one unit), and the
documents each one holds. A unit travels in a Ray Data row as its JSON form."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from indexers.ingest.load import LoadFailure, LoadOptions, iter_files, load_sourced, parse_record
from indexers.records import Document


@dataclass(frozen=True, slots=True)
class Unit:
    """A piece of the input: ``path``'s bytes [start, end) (end -1: to the end), or files."""

    path: str = ""
    root: str = ""
    start: int = 0
    end: int = -1
    files: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, raw: str) -> Unit:
        """From its JSON form (how units travel in Ray Data rows)."""
        unit = cls(**json.loads(raw))
        return dataclasses.replace(unit, files=tuple((f[0], f[1]) for f in unit.files))


def plan_units(paths: Iterable[Path], options: LoadOptions, unit_bytes: int) -> list[Unit]:
    units: list[Unit] = []
    group: list[tuple[str, str]] = []
    size = 0
    for path, root in iter_files(paths, options):
        name = path.name.lower()
        if name.endswith((".jsonl", ".ndjson")):
            total = path.stat().st_size
            units += [
                Unit(str(path), str(root), s, min(s + unit_bytes, total))
                for s in range(0, max(total, 1), unit_bytes)
            ]
        elif name.endswith(".gz"):
            units.append(Unit(str(path), str(root)))
        else:
            group.append((str(path), str(root)))
            size += path.stat().st_size
            if size >= unit_bytes:
                units.append(Unit(files=tuple(group)))
                group, size = [], 0
    if group:
        units.append(Unit(files=tuple(group)))
    return units


def taper(units: list[Unit], tail_bytes: int, parts: int) -> list[Unit]:
    """The byte ranges that hold the input's last ``tail_bytes`` each cut into ``parts``.

    Units run at once, a core each, and the run ends with the last wave of them: small units
    there finish closer together and leave the stages after them (embedding, building, the
    owner's adoption) less to do once the input is read. The same lines, in the same order.
    """
    if parts <= 1:
        return units
    out: list[list[Unit]] = []
    left = tail_bytes
    for unit in reversed(units):
        size = unit.end - unit.start
        # a whole file or a group of files stays as it is, and so does a range too small to cut
        if left <= 0 or unit.end < 0 or not unit.path or size < parts:
            out.append([unit])
            continue
        step = -(-size // parts)
        out.append(
            [
                dataclasses.replace(unit, start=s, end=min(s + step, unit.end))
                for s in range(unit.start, unit.end, step)
            ]
        )
        left -= size
    return [u for cut in reversed(out) for u in cut]


def read_unit(unit: Unit, options: LoadOptions) -> Iterator[Document | LoadFailure]:
    return (item for _, item in read_unit_sourced(unit, options))


def read_unit_sourced(unit: Unit, options: LoadOptions) -> Iterator[tuple[str, Document | LoadFailure]]:
    """``read_unit``, each item with where it was read (``file``, ``file:line``, or
    ``file@byte`` in a JSONL byte range, whose line number no worker knows)."""
    for path, root in unit.files:
        yield from load_sourced(Path(path), Path(root), options)
    if not unit.path:
        return
    if unit.end < 0:
        yield from load_sourced(Path(unit.path), Path(unit.root), options)
        return
    with Path(unit.path).open("rb") as f:  # lines that start inside [start, end)
        if unit.start > 0:
            f.seek(unit.start - 1)
            f.readline()  # the line under way at ``start`` belongs to the unit before
        while f.tell() < unit.end:
            at = f.tell()
            line = f.readline()
            if not line:
                break
            source = f"{unit.path}@{at}"
            if len(line) > options.max_bytes:
                yield source, LoadFailure(source, "line over the size limit")
            elif line.strip():
                try:
                    yield source, parse_record(line.decode("utf-8"), source, options.tenant, options.fields)
                except UnicodeDecodeError as exc:
                    yield source, LoadFailure(source, f"cannot read: {exc}")
