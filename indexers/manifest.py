"""What wrote an index: the embedding model, its dimension and the lexical analyzer's version.

Vectors of two models in one index rank against each other as noise, and terms of two analyzers
miss each other, with no error anywhere. So the first start writes ``index.json`` into the data
dir, and every later start compares: a different model, dimension or analyzer is refused with a
message that says what wrote the index and how to go on. The embedding cache is keyed by model
already; this guards the tiers.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from indexers.text.lexical import ANALYZER_VERSION

log = logging.getLogger(__name__)
_FP32_ONNX = re.compile(r"@onnx(?=\s|$)")
MANIFEST = "index.json"


class IndexMismatch(RuntimeError):
    """The settings would write into an index that another model or analyzer wrote."""


@dataclass(frozen=True, slots=True)
class IndexManifest:
    embedding_model: str
    dim: int
    analyzer: str = ANALYZER_VERSION

    @classmethod
    def of(cls, model_name: str, dim: int) -> IndexManifest:
        """ONNX fp32 gives the vectors torch gives (measured, docs/benchmarks.md), so "@onnx" is
        one model with the torch one: an index built on a GPU can be served on a CPU."""
        return cls(_FP32_ONNX.sub("", model_name), dim)  # each model of a split embedder


TIER_DIRS = ("hot", "cold")  # what the embedded tiers write into the data dir


def index_exists(data_dir: Path) -> bool:
    """Whether anything was ever written into ``data_dir``'s embedded index (a read-only command
    on a data dir without one says so instead of creating an empty one)."""
    return (data_dir / MANIFEST).exists() or _tiers_written(data_dir)


def _tiers_written(data_dir: Path) -> bool:
    return any((data_dir / name).is_dir() for name in TIER_DIRS)


def stored_manifest(data_dir: Path) -> IndexManifest | None:
    """What ``data_dir``'s manifest records, or None where there is none it can read."""
    try:
        stored = json.loads((data_dir / MANIFEST).read_text(encoding="utf-8"))
        return IndexManifest(str(stored["embedding_model"]), int(stored["dim"]), str(stored["analyzer"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_manifest(data_dir: Path, current: IndexManifest) -> None:
    """Write the manifest on first use; raise ``IndexMismatch`` when the index was written otherwise."""
    path = data_dir / MANIFEST
    if not path.exists():
        # An index older than the manifest left its tiers' folders; a new data dir may hold other
        # files already (the server's serve.json, the embedding cache) and is not one.
        if _tiers_written(data_dir):
            log.warning("index in %s predates %s: recording %s", data_dir, MANIFEST, current)
        _write(path, current)
        return
    stored = json.loads(path.read_text(encoding="utf-8"))
    wanted = asdict(current)
    different = {k: (stored.get(k), v) for k, v in wanted.items() if stored.get(k) != v}
    if not different:
        return
    shown = "; ".join(f"{k}: index {old!r}, settings {new!r}" for k, (old, new) in different.items())
    hint = (
        f"set {_settings_for(str(stored.get('embedding_model')))} to use it"
        if "embedding_model" in different or "dim" in different
        else f"remove {data_dir} and ingest again (the analyzer changed: its terms no longer match)"
    )
    raise IndexMismatch(
        f"the index in {data_dir} was written differently ({shown}); {hint}, "
        f"or ingest into a new RAG_DATA_DIR"
    )


def _settings_for(written_by: str) -> str:
    """The settings that name ``written_by`` again: "all-MiniLM-L6-v2@onnx-int8 (query: …)" →
    the model, its backend; a model per language ("… | zh: …") → auto, the default."""
    if " | " in written_by:
        return "RAG_EMBEDDING__MODEL=auto"
    model, _, backend = written_by.split(" (", 1)[0].partition("@")
    return f"RAG_EMBEDDING__MODEL={model}" + (f" RAG_EMBEDDING__BACKEND={backend}" if backend else "")


def _write(path: Path, manifest: IndexManifest) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(manifest), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
