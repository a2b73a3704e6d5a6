"""The root command: help that reads like a man page, a bad setting as one line (``fail``).

Typer's rich help prints a type beside every parameter, flags included (``--json <bool>``,
``--help <bool>``: as if they took a value) and lists as ``<list[Path]>``; its plain formatter
leaves flags bare. ``help_types`` makes the rich help do the same: a flag shows no type, a
list its element's (``paths...  <Path>``), every other parameter keeps Typer's label.
"""

from __future__ import annotations

from typing import Any, NoReturn, get_args

import typer
from rich.console import Console
from typer.core import TyperArgument, TyperGroup, TyperOption

from rag_router.settings import SettingsError

_option_type = TyperOption.display_type_rich
_argument_type = TyperArgument.display_type_rich


def _list_type(param: TyperOption | TyperArgument) -> str | None:
    """``list[Path]`` → ``<Path>`` (the name column says ``paths...``; an option is repeated);
    None when the parameter is not a list."""
    descriptor = param.type_descriptor
    if not descriptor.is_list:
        return None
    (element,) = get_args(descriptor.annotation) or (str,)
    return f"<{getattr(element, '__name__', 'value')}>"


def _option_display(self: TyperOption, ctx: Any) -> str | None:
    if self.metavar is None and (self.is_flag or self.count):
        return None  # a flag takes no value
    return _list_type(self) or _option_type(self, ctx)


def _argument_display(self: TyperArgument, ctx: Any) -> str | None:
    return _list_type(self) or _argument_type(self, ctx)


def help_types() -> None:
    """Show parameter types in rich help as described above (idempotent; the CLI's help only)."""
    TyperOption.display_type_rich = _option_display  # type: ignore[method-assign]
    TyperArgument.display_type_rich = _argument_display  # type: ignore[method-assign,assignment]


# The order a user meets the commands in: start, fill, ask, look, manage, then the rest.
ORDER = (
    "serve",
    "ingest",
    "ask",
    "query",
    "documents",
    "jobs",
    "retier",
    "llm",
    "mcp",
    "eval",
    "datasets",
    "hash-key",
)


def fail(message: str) -> NoReturn:
    """A condition the user can fix: one line on stderr, exit status 2, no traceback."""
    # soft_wrap: one line at any width, so a script or a log keeps the whole message together
    Console(stderr=True).print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


class RootGroup(TyperGroup):
    """``rag-router``: a setting that does not parse is one line naming it, exit status 2;
    commands listed in ``ORDER`` (any other after them, by name)."""

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except SettingsError as exc:
            fail(str(exc))
