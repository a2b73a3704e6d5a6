"""Every command the README (and docs/usage.md, docs/operations.md) shows runs as written: its
`rag-router` lines parse against the CLI, its `curl` examples hit routes the API has with bodies
its request models accept, and the `make` targets and bench scripts it names exist.

Nothing is run: a command line is resolved to its (Typer's click) command and parsed with
``make_context`` (types, required arguments, unknown options, paths in the checkout that must
exist); the README's usage synopsis (a ``text`` block) and inline mentions are checked for their
subcommands and options.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer
from pydantic import BaseModel

from rag_router.api import schemas
from rag_router.api.app import create_app
from rag_router.cli import app as cli_app
from rag_router.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
# The README and the docs pages that show commands (the CLI's synopsis moved to docs/usage.md)
CHECKED = ("README.md", "docs/usage.md", "docs/operations.md")
README = "\n".join((ROOT / name).read_text(encoding="utf-8") for name in CHECKED)
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```[ \t]*$", re.MULTILINE | re.DOTALL)
SHELL_STOPS = {"|", "||", "&&", ";", ">", ">>", "<", "&"}
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def blocks(*langs: str) -> list[str]:
    return [m.group(3) for m in FENCE.finditer(README) if m.group(2) in langs]


def inline_spans() -> list[str]:
    """Inline code outside the fenced blocks, a line break inside a span read as a space."""
    prose = FENCE.sub("", README)
    return [" ".join(m.group(1).split()) for m in re.finditer(r"`([^`\n]+(?:\n[^`\n]+)?)`", prose)]


def logical_lines(block: str) -> Iterator[str]:
    """Shell lines with their backslash continuations joined."""
    yield from (line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip())


def words(line: str) -> list[str]:
    """The first simple command of a shell line: its words, without leading VAR=value
    assignments, up to a pipe, redirection or list operator, comments dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens: list[str] = []
    for token in lexer:
        if token in SHELL_STOPS:
            break
        tokens.append(token)
    while tokens and ENV_ASSIGNMENT.match(tokens[0]):
        tokens.pop(0)
    return tokens


def rag_router_argv(tokens: list[str]) -> list[str] | None:
    if tokens and Path(tokens[0]).name == "rag-router":
        return tokens[1:]
    return None


def block_commands() -> list[list[str]]:
    found = [words(line) for block in blocks("bash", "sh") for line in logical_lines(block)]
    return [argv for tokens in found if (argv := rag_router_argv(tokens)) is not None]


def synopsis_commands() -> list[list[str]]:
    """The usage synopsis (`rag-router ingest PATH... [--tier auto|hot|cold]`, alternatives as
    `documents get ID | documents delete ID`) and inline mentions (`rag-router jobs follow ID`)."""
    out: list[list[str]] = []
    for line in (line for block in blocks("text") for line in logical_lines(block)):
        for part in line.split(" #")[0].split(" < ")[0].split(" | "):
            tokens = [t.strip("[]") for t in shlex.split(part) if t.strip("[]")]
            argv = tokens[1:] if tokens[0] == "rag-router" else tokens  # "… | documents delete ID"
            out.append(argv)
    for span in inline_spans():
        mention = rag_router_argv(words(span))
        if mention and mention[0] not in ("…", "..."):  # "`rag-router …`": any command
            out.append(mention)
    return out


ROOT_COMMAND = typer.main.get_command(cli_app)


def resolve(argv: list[str]) -> tuple[Any, list[str], list[str]]:
    """The (sub)command ``argv`` names, its path and the arguments left for it. (Typer vendors
    click: a group is a command with ``get_command``.)"""
    command: Any = ROOT_COMMAND
    path = ["rag-router"]
    rest = list(argv)
    while hasattr(command, "get_command"):
        assert rest, f"`{' '.join(path)}` needs a subcommand"
        sub = command.get_command(typer.Context(command, info_name=path[-1]), rest[0])
        assert sub is not None, f"`{' '.join(path)}` has no command {rest[0]!r}"
        command, path, rest = sub, [*path, rest.pop(0)], rest
    return command, path, rest


def outside_checkout(token: str) -> bool:
    """A path the user brings (a dataset under ../shared/data, an index under /tmp)."""
    return token.startswith(("../", "/"))


def test_the_readme_has_commands_to_check() -> None:
    assert len(block_commands()) >= 3
    assert len(synopsis_commands()) >= 10
    assert len(curl_examples()) >= 2


@pytest.mark.parametrize("argv", block_commands(), ids=" ".join)
def test_rag_router_command_parses(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the checkout's root, as the README's commands run; a path the user brings that is not
    here stands in as an empty folder (paths in the checkout, data/sample, must exist)."""
    monkeypatch.chdir(ROOT)
    command, path, rest = resolve(argv)
    rest = [str(tmp_path) if outside_checkout(t) and not Path(t).exists() else t for t in rest]
    try:
        command.make_context(" ".join(path), rest)
    except typer.TyperException as exc:
        pytest.fail(f"`rag-router {' '.join(argv)}`: {exc}")


@pytest.mark.parametrize("argv", synopsis_commands(), ids=" ".join)
def test_synopsis_names_real_commands_and_options(argv: list[str]) -> None:
    command, path, rest = resolve(argv)
    known = {"--help"} | {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    unknown = [t.split("=")[0] for t in rest if t.startswith("--") and t.split("=")[0] not in known]
    assert not unknown, f"`{' '.join(path)}` has no option {unknown}"


def curl_examples() -> list[tuple[str, str, dict[str, object] | None]]:
    """(method, path, JSON body) of each `curl` line of the README's shell blocks."""
    out = []
    for block in blocks("bash", "sh"):
        for line in logical_lines(block):
            tokens = words(line)
            if not tokens or tokens[0] != "curl":
                continue
            url = next(t for t in tokens if re.match(r"(https?://)?(localhost|127\.0\.0\.1):\d+/", t))
            path = urlsplit(url if "://" in url else f"http://{url}").path
            data = next((tokens[i + 1] for i, t in enumerate(tokens) if t in ("-d", "--data")), None)
            method = next((tokens[i + 1] for i, t in enumerate(tokens) if t == "-X"), None)
            body = json.loads(data) if data is not None else None  # invalid JSON fails here
            out.append((method or ("POST" if data is not None else "GET"), path, body))
    return out


OPENAPI = create_app(Settings(data_dir=Path("/nonexistent"))).openapi()


@pytest.mark.parametrize("example", curl_examples(), ids=lambda e: f"{e[0]} {e[1]}")
def test_curl_example_hits_a_route_with_a_valid_body(
    example: tuple[str, str, dict[str, object] | None],
) -> None:
    method, path, body = example
    operation = OPENAPI["paths"].get(path, {}).get(method.lower())
    assert operation is not None, f"{method} {path} is not in the API"
    if body is None:
        return
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    model = getattr(schemas, ref.rsplit("/", 1)[1])
    assert issubclass(model, BaseModel)
    model.model_validate(body)  # raises with the field that does not validate


def test_make_targets_and_bench_scripts_exist() -> None:
    targets = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M))
    lines = [line for b in blocks("bash", "sh") for line in logical_lines(b)] + inline_spans()
    for line in lines:
        tokens = words(line)
        if tokens[:1] == ["make"]:
            named = [t for t in tokens[1:] if not t.startswith("-") and "=" not in t]
            assert set(named) <= targets, f"`{line}`: no make target {set(named) - targets}"
        scripts = [t for t in tokens if t.startswith("bench/") and t.endswith((".py", ".sh"))]
        for script in scripts:
            assert (ROOT / script).is_file(), f"`{line}`: no {script}"


def repo_paths() -> set[str]:
    """Paths into the checkout the README names (`prompts/constraints.yaml`, links): those under
    one of its top-level folders, an example id such as `reports/2024/q1.pdf` aside."""
    tops = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith((".venv", ".git"))}
    named = inline_spans() + re.findall(r"\]\(([^)#]+)\)", README)
    named += [t for b in blocks("bash", "sh") for line in logical_lines(b) for t in words(line)]
    out = set()
    for text in named:
        for token in text.split():
            token = token.strip("`'\",;:()")
            if "/" in token and "*" not in token and token.split("/")[0] in tops:
                out.update(expand(token))
    return out


def expand(path: str) -> list[str]:
    """`indexers/{ingest,embed}/` → `indexers/ingest/`, `indexers/embed/` (one brace group)."""
    brace = re.search(r"\{([^}]*)\}", path)
    if brace is None:
        return [path]
    return [path[: brace.start()] + part + path[brace.end() :] for part in brace.group(1).split(",")]


def test_paths_the_readme_names_exist() -> None:
    paths = repo_paths()
    assert {"data/sample", "docs/design.md", "indexers/tiers/", "prompts/constraints.yaml"} <= paths
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"README names paths that are not in the checkout: {missing}"
