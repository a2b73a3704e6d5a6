"""The CLI as a whole: it starts with the README's .env, its help reads right, and it starts light."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from rag_router.cli import app
from rag_router.settings import SettingsError, get_settings

ENV_EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"
runner = CliRunner()


@pytest.fixture
def dotenv_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh folder holding `cp .env.example .env`, as the README's first step does."""
    shutil.copy(ENV_EXAMPLE, tmp_path / ".env")
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("RAG_")]:
        monkeypatch.delenv(name)
    return tmp_path


def test_env_example_as_dotenv_builds_settings(dotenv_cwd: Path) -> None:
    settings = get_settings()
    assert settings.qdrant.indexing_threshold_kb is None  # `RAG_..._KB=` means unset
    assert settings.llm.base_url is None and settings.qdrant.url is None
    assert settings.port == 8000 and settings.data_dir == Path(".rag-data")


def test_env_example_as_dotenv_runs_a_command(dotenv_cwd: Path) -> None:
    assert runner.invoke(app, ["--help"]).exit_code == 0
    result = runner.invoke(app, ["jobs", "follow", "some-job"])  # builds the settings, finds no server
    assert result.exit_code == 2 and "no server holds the data dir" in result.output, result.output


def test_a_bad_setting_is_one_line_naming_it(dotenv_cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_QDRANT__INDEXING_THRESHOLD_KB", "lots")
    result = runner.invoke(app, ["jobs", "follow", "some-job"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "RAG_QDRANT__INDEXING_THRESHOLD_KB" in lines[0] and "'lots'" in lines[0]


def test_a_bad_secret_is_named_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_API_KEYS", "not-json-s3cret")
    with pytest.raises(SettingsError, match="RAG_API_KEYS") as caught:
        get_settings(_env_file=None)
    assert "s3cret" not in str(caught.value)


def _helps(command: Any, path: list[str]) -> list[list[str]]:
    """Every command's argv, groups included (Typer's own click: a group has ``commands``)."""
    found = [path]
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            found += _helps(sub, [*path, name])
    return found


def test_every_help_shows_flags_bare_and_lists_repeated() -> None:
    paths = _helps(typer.main.get_command(app), [])
    assert ["ingest"] in paths and ["documents", "get"] in paths
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output and "list[" not in result.output, (path, result.output)
    ingest = runner.invoke(app, ["ingest", "--help"], terminal_width=200).output
    assert re.search(r"paths\.\.\.\s+<Path>", ingest) and re.search(r"--include\s+<str>", ingest)
    query = runner.invoke(app, ["query", "--help"], terminal_width=200).output
    assert "<int range>" in query  # options that take a value keep their type


@pytest.mark.parametrize("group", ["documents", "jobs", "datasets"])
def test_a_group_help_names_its_commands(group: str) -> None:
    """`rag-router --help` is where a new user learns `documents list` exists: a group's one line
    names exactly the commands it has (it said "read or delete one" and "show" for `get`)."""
    command = typer.main.get_command(app)
    sub = command.commands[group]  # type: ignore[attr-defined]
    named = re.findall(r"\b[a-z]+\b", (sub.help or "").split(":")[-1])
    assert sorted(named) == sorted(sub.commands), (group, sub.help)


def test_importing_the_cli_loads_no_engine_model_or_web_app() -> None:
    """`rag-router --help` starts fast because the commands load these only when they run."""
    heavy = ("torch", "numpy", "fastapi", "transformers", "onnxruntime", "qdrant_edge", "tantivy")
    code = f"import sys, rag_router.cli; print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == ""


def test_auto_device_without_a_gpu_driver_is_cpu_without_torch() -> None:
    code = (
        "import sys, indexers.embed.base as b; b.GPU_DEVICE_FILES = ('/nonexistent/gpu',); "
        "print(b.resolve_device('auto'), 'torch' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.split() == ["cpu", "False"]


def test_a_command_in_process_opens_one_query_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CLI process has one caller: not the server's 2 + 1 query-lane copies of the model."""
    import rag_router.api.app as api_app

    (tmp_path / "index.json").write_text("{}")
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("RAG_URL", raising=False)
    built = []

    def create_app(settings: object, **_: object) -> object:
        built.append(settings)
        raise RuntimeError("stop here")

    monkeypatch.setattr(api_app, "create_app", create_app)
    result = runner.invoke(app, ["query", "anything"])
    assert isinstance(result.exception, RuntimeError) and len(built) == 1
    assert built[0].embedding.query_workers == 1  # type: ignore[attr-defined]


def test_commands_are_listed_in_the_order_a_user_meets_them() -> None:
    listed = runner.invoke(app, ["--help"], terminal_width=200).output
    names = re.findall(r"^│ ([a-z][a-z-]*)\s{2,}", listed, re.MULTILINE)
    assert names[:6] == ["serve", "ingest", "ask", "query", "documents", "jobs"], names
    assert names.index("eval") > names.index("llm")


def test_help_says_the_defaults_and_keeps_sentences_whole() -> None:
    assert "RAG_PORT, 8000" in runner.invoke(app, ["serve", "--help"], terminal_width=200).output
    llm = runner.invoke(app, ["llm", "serve", "--help"], terminal_width=200).output
    assert "RAG_LLM__LOCAL_CTX, 2048" in llm and "RAG_LLM__LOCAL_PORT, 8081" in llm
    ingest = " ".join(runner.invoke(app, ["ingest", "--help"], terminal_width=200).output.split())
    assert "1 a server job failed or was cancelled" in ingest
    listed = runner.invoke(app, ["--help"], terminal_width=200).output
    assert "Evaluate retrieval" in listed and "--answers" not in listed  # its first sentence only


def test_counts_agree_with_their_nouns_and_faiss_says_nothing_at_info() -> None:
    import logging

    from rag_router.cli.common import setup_logging
    from rag_router.cli.store import chunks
    from rag_router.settings import Settings

    assert (chunks(1), chunks(2), chunks(0)) == ("1 chunk", "2 chunks", "0 chunks")
    setup_logging(Settings(log_level="INFO"), command=False)
    assert not logging.getLogger("faiss.loader").isEnabledFor(logging.INFO)
