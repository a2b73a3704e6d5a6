"""Public BEIR collections for ``rag-router eval``: download, check, unpack.

The archives are the BEIR authors' own, at the address their README gives, and each is checked
against the MD5 that README publishes *before* anything is unpacked; a mismatch leaves nothing
behind. Unpacking refuses members that would land outside the destination.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

BEIR = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"


@dataclass(frozen=True, slots=True)
class Collection:
    name: str
    url: str
    md5: str  # as published in the BEIR README (github.com/beir-cellar/beir)
    about: str


CATALOGUE: dict[str, Collection] = {
    c.name: c
    for c in (
        Collection(
            "scifact", f"{BEIR}/scifact.zip", "5f7d1de60b170fc8027bb7898e2efca1", "5K abstracts, 300 claims"
        ),
        Collection(
            "nfcorpus",
            f"{BEIR}/nfcorpus.zip",
            "a89dba18a62ef92f7d323ec890a0d38d",
            "3.6K medical, 323 queries",
        ),
        Collection(
            "arguana",
            f"{BEIR}/arguana.zip",
            "8ad3e3c2a5867cdced806d6503f29b99",
            "8.7K arguments, 1,406 queries",
        ),
        Collection(
            "scidocs", f"{BEIR}/scidocs.zip", "38121350fc3a4d2f48850f6aff52e4a9", "25K papers, 1,000 queries"
        ),
        Collection(
            "fiqa", f"{BEIR}/fiqa.zip", "17918ed23cd04fb15047f73e6c3bd9d9", "57K finance posts, 648 queries"
        ),
        Collection(
            "trec-covid",
            f"{BEIR}/trec-covid.zip",
            "ce62140cb23feb9becf6270d0d1fe6d1",
            "171K papers, 50 queries",
        ),
    )
}


class DatasetError(RuntimeError):
    """A download that failed, did not match its checksum, or would unpack outside its folder."""


def fetch(
    collection: Collection,
    dest: Path,
    *,
    client: httpx.Client | None = None,
    progress: Callable[[int, int | None], None] | None = None,
) -> Path:
    """``dest/NAME`` in BEIR layout (corpus.jsonl, queries.jsonl, qrels/); kept if already there."""
    target = dest / collection.name
    if (target / "corpus.jsonl").exists() and (target / "qrels").is_dir():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest, prefix=f".{collection.name}-") as tmp:
        archive = Path(tmp) / f"{collection.name}.zip"
        digest = _download(collection.url, archive, client, progress)
        if digest != collection.md5:
            raise DatasetError(
                f"{collection.url}: MD5 {digest}, expected {collection.md5} (the BEIR README's); "
                "nothing unpacked"
            )
        unpacked = Path(tmp) / "unpacked"
        _unzip(archive, unpacked)
        inner = unpacked / collection.name if (unpacked / collection.name).is_dir() else unpacked
        if not (inner / "corpus.jsonl").exists():
            raise DatasetError(f"{collection.url}: no corpus.jsonl in the archive")
        shutil.move(str(inner), target)
    return target


def _download(
    url: str, path: Path, client: httpx.Client | None, progress: Callable[[int, int | None], None] | None
) -> str:
    md5 = hashlib.md5(usedforsecurity=False)
    own = client is None
    http = client or httpx.Client(follow_redirects=True, timeout=httpx.Timeout(30.0, read=120.0))
    try:
        with http.stream("GET", url) as response, path.open("wb") as out:
            if response.status_code != 200:
                raise DatasetError(f"{url}: HTTP {response.status_code}")
            total = int(response.headers["content-length"]) if "content-length" in response.headers else None
            done = 0
            for block in response.iter_bytes(1 << 20):
                out.write(block)
                md5.update(block)
                done += len(block)
                if progress:
                    progress(done, total)
    except httpx.HTTPError as exc:
        raise DatasetError(f"{url}: {exc}") from exc
    finally:
        if own:
            http.close()
    return md5.hexdigest()


def _unzip(archive: Path, dest: Path) -> None:
    root = dest.resolve()
    with zipfile.ZipFile(archive) as z:
        for member in z.namelist():
            if not (root / member).resolve().is_relative_to(root):
                raise DatasetError(f"{archive.name}: member {member!r} would land outside {dest}")
        z.extractall(dest)
