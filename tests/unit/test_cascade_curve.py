"""bench/cascade_curve.py: what it needs is checked up front, with an argparse error that says
what is missing and how to make it, and its output lands where the page reads it."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "cascade_curve.py"


@pytest.fixture(scope="module")
def cascade() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cascade_curve", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["cascade_curve"] = module
    spec.loader.exec_module(module)
    return module


def beir(root: Path, splits: tuple[str, ...]) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n', encoding="utf-8")
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n', encoding="utf-8")
    for split in splits:
        (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return root


def error_of(cascade: ModuleType, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cascade.parse_args(argv)
    assert exit_info.value.code == 2  # argparse's usage error, not a crash
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_dataset_without_train_split_is_a_clear_error(
    cascade: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = beir(tmp_path / "set", ("test",))
    err = error_of(cascade, ["--data", str(data), "--data-dir", str(tmp_path / "index")], capsys)
    assert f"no qrels/train.tsv in DATASET {data}" in err
    assert "scifact" in err  # which dataset has one


def test_missing_index_names_the_command_that_builds_it(
    cascade: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = beir(tmp_path / "set", ("train", "test"))
    index = tmp_path / "index"
    err = error_of(cascade, ["--data", str(data), "--data-dir", str(index)], capsys)
    assert f"no index in --data-dir {index}" in err
    assert f"rag-router eval {data} --route both --tier-split 0.3 --data-dir {index}" in err


def test_default_out_is_the_data_dirs_evals_folder(
    cascade: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAG_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    data = beir(tmp_path / "set", ("train", "test"))
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "index.json").write_text("{}")
    args = cascade.parse_args(["--data", str(data), "--data-dir", str(tmp_path / "index")])
    assert Path(args.out) == Path(".rag-data") / "evals" / "cascade.json"  # not /evals/...

    cascade.write({"test": []}, args.out)  # the folder is made
    assert (tmp_path / ".rag-data" / "evals" / "cascade.json").read_text().startswith("{")


def test_index_held_by_a_server_is_a_clear_error(
    cascade: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = beir(tmp_path / "set", ("train", "test"))
    index = tmp_path / "index"
    index.mkdir()
    (index / "index.json").write_text("{}")
    owner = json.dumps({"pid": os.getppid(), "url": "http://127.0.0.1:8765"})  # a live process
    (index / "serve.json").write_text(owner)
    err = error_of(cascade, ["--data", str(data), "--data-dir", str(index)], capsys)
    assert f"the index in --data-dir {index} is held by `rag-router serve`" in err


def test_index_in_one_tier_only_is_a_clear_error(
    cascade: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = beir(tmp_path / "set", ("train", "test"))
    index = tmp_path / "index"
    index.mkdir()
    (index / "index.json").write_text("{}")

    async def all_cold(data_dir: Path) -> dict[str, int]:
        return {"hot": 0, "cold": 12}

    monkeypatch.setattr(cascade, "tier_counts", all_cold)
    with pytest.raises(SystemExit) as exit_info:
        cascade.main(["--data", str(data), "--data-dir", str(index), "--out", "-"])
    message = str(exit_info.value.code)
    assert f"the index in {index} is not split between the tiers" in message
    assert "--tier-split 0.3" in message
