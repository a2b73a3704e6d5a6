"""Ids read twice in one ingest against a server: the CLI uploads in batches, one job each, and
a server sees repeats only within one upload. So the CLI reads the id of everything it uploads
(``indexers.ingest.load.claims``, the loader's own code, with the same field names) and leaves a
repeat out of the upload, reporting it where it was read (``file``, ``file:line``), as an ingest
in this process does. Memory stays flat: 8 bytes an id (``SeenIds``)."""

from __future__ import annotations

import gzip
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, NamedTuple

from rag_router.cli.report import Summary

if TYPE_CHECKING:
    from indexers.ingest.load import LoadOptions


class Upload(NamedTuple):
    name: str  # the relative name the server's ids come from
    path: Path  # what is sent: the file, or a copy of it without its repeated records
    local: Path  # the file named here, where failures are reported


class Repeats:
    """Each file to upload, once what it holds was checked against everything before it."""

    def __init__(self, options: LoadOptions, summary: Summary, folder: Path) -> None:
        from indexers.ingest.load import SeenIds

        self._options = options
        self._summary = summary
        self._folder = folder  # where copies without repeats are written (removed once sent)
        self._seen = SeenIds()

    def uploads(self, files: Iterable[tuple[Path, Path]]) -> Iterator[Upload]:
        """(file, the folder its id is relative to) → what to upload; a file holding only
        repeats is not sent at all."""
        from indexers.ingest.load import claims, relative_id, repeat_reason

        for n, (path, root) in enumerate(files):
            repeated = array("q")  # JSONL lines whose ids were read before
            others = 0
            for claim in claims(path, root, self._options):
                if claim.doc_id is None or not self._seen.repeats(
                    self._options.tenant, claim.doc_id, claim.hashed
                ):
                    others += 1
                    continue
                repeated.append(claim.line)
                self._fail(claim.source, repeat_reason(claim.doc_id))
            name = relative_id(path, root)
            if not repeated:
                yield Upload(name, path, path)
            elif others:  # a JSONL file with records of its own besides the repeats
                yield Upload(name, self._without(path, repeated, n), path)

    def _fail(self, source: str, reason: str) -> None:
        self._summary.failures.append((source, reason))
        self._summary.failed += 1
        self._summary.documents += 1

    def _without(self, path: Path, lines: array[int], n: int) -> Path:
        """A copy of the JSONL file with the given lines made blank (spaces: a blank line is no
        record), byte for byte as long: the other lines keep their numbers and places, so the
        server reports each as the loader does here (``file:line``), bytes that are not UTF-8 too."""
        gz = path.name.lower().endswith(".gz")
        copy = self._folder / f"{n}{'.jsonl.gz' if gz else '.jsonl'}"
        skip = iter(lines)
        blank = next(skip, 0)
        number = 0
        with _text(path, "r", gz) as source, _text(copy, "w", gz) as out:
            try:
                for number, line in enumerate(source, 1):
                    if number == blank:
                        content = line.rstrip("\r\n")
                        size = len(content.encode("utf-8", "surrogateescape"))
                        out.write(" " * size + line[len(content) :])
                        blank = next(skip, 0)
                    else:
                        out.write(line)
            except (OSError, EOFError) as exc:  # the copy ends here; what the loader says of it
                self._fail(f"{path}:{number + 1}", f"cannot read: {exc}")
        return copy


def _text(path: Path, mode: str, gz: bool) -> IO[str]:
    """Text as the loader reads its lines (universal newlines), written back unchanged."""
    if gz:
        return gzip.open(  # type: ignore[return-value]
            path, f"{mode}t", encoding="utf-8", errors="surrogateescape", newline="", compresslevel=1
        )
    return path.open(mode, encoding="utf-8", errors="surrogateescape", newline="")
