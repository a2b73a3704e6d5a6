"""The page at / in a real headless Chromium (Debian's, driven by Selenium through its
chromedriver; nothing downloaded): ask and watch the answer stream with a citation, open it, see
the route highlight a clause, upload a file and watch its job finish, open and delete a document,
see the saved evaluation. Screenshots of each step go to artifacts/screenshots/ (or
$RAG_SCREENSHOTS), with the first load's size and paint time in page-load.json (reported; the
size is asserted, the time is not)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.crash.test_sigkill import free_port, server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KEY = "page-test-key"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
SHOTS = Path(os.environ.get("RAG_SCREENSHOTS", ROOT / "artifacts" / "screenshots"))


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("page") / "data"
    env = {**os.environ, "RAG_DATA_DIR": str(data), "RAG_LOG_LEVEL": "WARNING"}
    done = subprocess.run(  # a real evaluation, saved in the data dir for the Evaluate tab
        [sys.executable, "-m", "rag_router.cli", "eval", str(ROOT / "data" / "eval" / "udhr"), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # the cascade curve measured on SciFact (bench/results/bench-cascade.json), as bench/cascade_curve.py prints it
    shutil.copy(ROOT / "bench" / "results" / "bench-cascade.json", data / "evals" / "cascade.json")
    port = free_port()
    with server(data, port, RAG_API_KEYS=json.dumps([KEY])):
        url = f"http://127.0.0.1:{port}"
        docs = [
            json.loads(line) for line in (ROOT / "data" / "sample" / "udhr.jsonl").read_text().splitlines()
        ]
        docs.append({"id": "notes/2026/harbour", "text": "Harbour dues rose in 2026.", "title": "Dues"})
        r = httpx.post(
            f"{url}/v1/documents",
            json={"documents": docs},
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=120,
        )
        assert r.status_code == 200, r.text
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (CHROMIUM and DRIVER):
        pytest.skip("no chromium + chromedriver (apt-get install chromium chromium-driver; .ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1366,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_script_timeout(60)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver: Any, condition: Any, seconds: float = 60) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds).until(condition)


def by_id(driver: Any, name: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, name)


def test_the_page_end_to_end(base_url: str, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    d.get(base_url + "/")
    load = d.execute_script(
        "const n = performance.getEntriesByType('navigation')[0];"
        "const r = performance.getEntriesByType('resource');"
        "const p = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint');"
        "return {bytes: n.transferSize + r.reduce((a, e) => a + e.transferSize, 0),"
        " resources: r.map(e => e.name), fcp_ms: p ? p.startTime : null, dom_ms: n.domContentLoadedEventEnd};"
    )
    (SHOTS / "page-load.json").write_text(json.dumps(load, indent=1))
    print(f"first load: {load['bytes']} bytes, first contentful paint {load['fcp_ms']} ms")
    assert 0 < load["bytes"] < 100_000, load
    assert all(u.startswith(base_url) for u in load["resources"]), load  # no CDN

    # the key, asked once (never in the URL)
    wait(d, lambda _: by_id(d, "key-form").is_displayed())
    by_id(d, "key-input").send_keys(KEY)
    by_id(d, "key-save").click()
    wait(d, lambda _: not by_id(d, "key-form").is_displayed())
    assert KEY not in d.current_url

    # ask: the answer streams in with citations; a citation opens its passage
    by_id(d, "q").send_keys("Can I be held in slavery?")
    by_id(d, "ask-button").click()
    wait(d, lambda _: "extractive" in by_id(d, "answer-mode").text or "llm" in by_id(d, "answer-mode").text)
    cites = d.find_elements(By.CSS_SELECTOR, "#answer .cite")
    assert cites and "slavery" in by_id(d, "answer").text.lower()
    assert (
        d.find_elements(By.CSS_SELECTOR, "#hits li .tier") and "#" in by_id(d, "hits").text
    )  # tier, leg ranks
    d.save_screenshot(str(SHOTS / "1-ask.png"))
    cites[0].click()
    passage = by_id(d, "passage")
    wait(d, lambda _: passage.is_displayed())
    assert "slavery" in passage.text.lower()
    d.save_screenshot(str(SHOTS / "2-citation.png"))

    # route: the clause is highlighted by its span, with the tiers, filters and reason
    q = by_id(d, "q")
    q.clear()
    q.send_keys("What does Article 17 say?")
    by_id(d, "ask-button").click()
    mark = wait(d, lambda _: d.find_elements(By.CSS_SELECTOR, "#query-marked mark.clause"))[0]
    assert mark.text == "Article 17"
    wait(d, lambda _: "article" in by_id(d, "route-reason").text)
    assert "17" in by_id(d, "route-facts").text
    wait(d, lambda _: d.find_elements(By.CSS_SELECTOR, "#timings span"))
    d.save_screenshot(str(SHOTS / "3-route.png"))

    # documents: upload a file, watch its job finish, open it, delete it
    by_id(d, "tab-docs").click()
    note = tmp_path / "harbour-note.md"
    note.write_text("# Harbour note\n\nPilots board every vessel over forty metres.\n", encoding="utf-8")
    by_id(d, "files").send_keys(str(note))
    by_id(d, "upload-button").click()
    wait(d, lambda _: ": done," in by_id(d, "job-status").text, 120)  # the job's status, not "0/1 done"
    assert by_id(d, "job-progress").get_attribute("value") == "1"
    assert "harbour-note.md: 1 document" in by_id(d, "file-results").text
    d.save_screenshot(str(SHOTS / "4-upload.png"))
    by_id(d, "doc-id").send_keys("harbour-note.md")
    by_id(d, "doc-get").click()
    wait(d, lambda _: "chunk" in by_id(d, "doc-status").text)
    assert "Pilots board every vessel" in by_id(d, "doc-view").text
    d.save_screenshot(str(SHOTS / "5-document.png"))
    by_id(d, "doc-delete").click()
    d.switch_to.alert.accept()
    wait(d, lambda _: "deleted" in by_id(d, "doc-status").text)
    gone = httpx.get(f"{base_url}/v1/documents/harbour-note.md", headers={"Authorization": f"Bearer {KEY}"})
    assert gone.status_code == 404

    # an id with slashes opens as itself
    doc_id = by_id(d, "doc-id")
    doc_id.clear()
    doc_id.send_keys("notes/2026/harbour")
    by_id(d, "doc-get").click()
    wait(d, lambda _: "notes/2026/harbour: 1 chunk" in by_id(d, "doc-status").text)
    assert "Harbour dues rose" in by_id(d, "doc-view").text

    # evaluate: the saved report as a table, the cascade curve as a plot
    by_id(d, "tab-eval").click()
    table = wait(d, lambda _: d.find_elements(By.CSS_SELECTOR, "#eval-tables table"))[0]
    assert "udhr" in table.text and "ndcg@10" in table.text
    assert d.find_elements(By.CSS_SELECTOR, "#eval-plot svg polyline.curve")
    d.save_screenshot(str(SHOTS / "6-evaluate.png"))


def test_the_page_is_not_in_the_api(base_url: str) -> None:
    schema = httpx.get(f"{base_url}/openapi.json").json()
    assert "/" not in schema["paths"] and not any(p.startswith("/ui") for p in schema["paths"])
    page = httpx.get(base_url + "/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert httpx.get(base_url + "/ui/nothing.js").status_code == 404
