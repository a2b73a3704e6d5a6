"""The docs cannot drift from the code: the configuration and API reference pages are what
docs/hooks.py writes from the settings model and the OpenAPI schema, and the README stays short."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel

from rag_router.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_generated_pages_are_current() -> None:
    docs = hooks()
    for name, render in docs.PAGES.items():
        committed = (ROOT / "docs" / name).read_text(encoding="utf-8")
        assert committed == render(), f"docs/{name} is stale: run `make docs` and commit it"


def test_the_configuration_page_lists_every_setting() -> None:
    page = hooks().configuration_page()
    names = []
    for name, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names += [f"RAG_{name.upper()}__{sub.upper()}" for sub in annotation.model_fields]
        else:
            names.append(f"RAG_{name.upper()}")
    missing = [n for n in names if f"`{n}`" not in page]
    assert not missing and len(names) > 80


def test_the_readme_fits_two_screens_and_links_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    for page in ("usage", "configuration", "api", "benchmarks", "operations"):
        assert f"(docs/{page}.md" in readme
