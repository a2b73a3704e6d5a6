"""Helpers shared by the benchmarks: machine description, a server on loopback, percentiles."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np


def machine() -> dict[str, object]:
    import torch

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def percentiles(ms: list[float]) -> dict[str, float]:
    if not ms:
        return {"n": 0}
    a = np.asarray(ms)
    return {
        "n": len(ms),
        "p50": round(float(np.percentile(a, 50)), 1),
        "p95": round(float(np.percentile(a, 95)), 1),
        "p99": round(float(np.percentile(a, 99)), 1),
        "max": round(float(a.max()), 1),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    env: dict[str, str], log_path: Path, ready_s: float = 120, mode: str = "w"
) -> tuple[str, subprocess.Popen[bytes], float]:
    """``rag-router serve`` on loopback with extra environment, started and waited for (up to
    ``ready_s``); its base URL, process and the seconds until ``/readyz`` answered 200."""
    port = free_port()
    full_env = {**os.environ, "RAG_LOG_LEVEL": "INFO", **env}
    began = time.perf_counter()
    with log_path.open(mode) as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rag_router.cli", "serve", "--port", str(port)],
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None:
                raise RuntimeError(f"server exited {proc.returncode}; see {log_path}")
            time.sleep(0.1)
    except BaseException:
        proc.terminate()
        proc.wait(timeout=60)
        raise
    return url, proc, time.perf_counter() - began


@contextlib.contextmanager
def server(
    env: dict[str, str], log_path: Path, ready_s: float = 120
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``rag-router serve`` on loopback with extra environment; yields its base URL and process."""
    url, proc, _ = start_server(env, log_path, ready_s)
    try:
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def emit(result: dict[str, Any], out: Path | None) -> None:
    """Print a benchmark's result as JSON and keep it in ``out`` when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if out is not None:
        out.write_text(text + "\n", encoding="utf-8")
