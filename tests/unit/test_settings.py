from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from rag_router.settings import Settings

ENV_EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"


def env_names(model: type[BaseModel], prefix: str = "RAG_") -> set[str]:
    names = set()
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names |= env_names(annotation, f"{prefix}{name.upper()}__")
        else:
            names.add(f"{prefix}{name.upper()}")
    return names


def test_every_setting_is_in_env_example() -> None:
    documented = set(re.findall(r"^#?\s*(RAG_[A-Z0-9_]+)=", ENV_EXAMPLE.read_text(), flags=re.M))
    assert env_names(Settings) == documented


def test_nested_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_TIERS__HOT_WINDOW_DAYS", "30")
    monkeypatch.setenv("RAG_QDRANT__API_KEY", "s3cret")
    monkeypatch.setenv("RAG_API_KEYS", '["a", "acme:b"]')
    s = Settings(_env_file=None)  # type: ignore[call-arg]
    assert s.tiers.hot_window_days == 30
    assert s.qdrant.api_key is not None and s.qdrant.api_key.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s) and [k.get_secret_value() for k in s.api_keys] == ["a", "acme:b"]
