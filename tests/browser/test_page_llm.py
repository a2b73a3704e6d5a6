"""The page streaming an answer a real model writes: the service pointed at llama.cpp's server
(SmolLM2-135M, the session's ``real_llm``), the question asked in headless Chromium."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.browser.test_page import ROOT, SHOTS, by_id, wait
from tests.browser.test_page import browser as browser
from tests.conftest import LLM_SLOT_CTX
from tests.crash.test_sigkill import free_port, server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llm_page(tmp_path_factory: pytest.TempPathFactory, real_llm: Any) -> Iterator[str]:
    data = tmp_path_factory.mktemp("page-llm") / "data"
    port = free_port()
    llm_env = {
        "RAG_LLM__BASE_URL": real_llm.base_url,
        "RAG_LLM__MODEL": real_llm.alias,
        "RAG_LLM__CONTEXT_TOKENS": str(LLM_SLOT_CTX),
        "RAG_LLM__MAX_TOKENS": "200",
        "RAG_LLM__SOURCES": "2",
        "RAG_LLM__TIMEOUT_S": "120",
    }
    with server(data, port, **llm_env):
        url = f"http://127.0.0.1:{port}"
        lines = (ROOT / "data" / "sample" / "udhr.jsonl").read_text().splitlines()
        r = httpx.post(f"{url}/v1/documents", json={"documents": [json.loads(x) for x in lines]}, timeout=120)
        assert r.status_code == 200, r.text
        yield url


def _tasks(llm: Any) -> list[Any]:
    slots = httpx.get(f"http://{llm.host}:{llm.port}/slots", timeout=5).json()
    return [slot.get("id_task") for slot in slots]


def test_the_page_streams_an_answer_from_a_real_model(llm_page: str, browser: Any, real_llm: Any) -> None:
    """The page against a service whose answers a real model writes. What a 135M model writes
    varies (the prompt carries a per-request nonce): the model's answer, or, when no source
    supports it or it ran past max_tokens, the quoted sentences marked degraded; either way the
    model was asked and the page shows a cited answer and its mode."""
    from selenium.webdriver.common.by import By

    before = _tasks(real_llm)
    d = browser
    d.get(llm_page + "/")
    by_id(d, "q").send_keys("Can I be held in slavery?")
    by_id(d, "ask-button").click()
    wait(d, lambda _: by_id(d, "answer-mode").text not in ("", "…"), seconds=120)
    d.save_screenshot(str(SHOTS / "8-llm-answer.png"))
    mode = by_id(d, "answer-mode").text
    assert mode.startswith("llm") or mode == "extractive · degraded", mode
    assert by_id(d, "answer").text.strip() and d.find_elements(By.CSS_SELECTOR, "#answer .cite")
    assert _tasks(real_llm) != before  # llama.cpp ran a task for this question
