"""The page at ``/``: ask (streamed answer, route, hits), documents, evaluate.

Static files packaged with the wheel (``static/``: one HTML page, one script, one stylesheet, no
build step, no CDN) that talk to the same JSON API as every other client; nothing here is in the
OpenAPI schema, and the JSON API does not change for it. The one route of its own,
``/ui/evals.json``, reads what ``rag-router eval`` saved in the data dir (``evals/*.json``) and
the cascade curve ``bench/cascade_curve.py`` printed into ``evals/cascade.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

from rag_router.api.deps import Tenant
from rag_router.errors import NotFound

STATIC = Path(__file__).parent / "static"
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
CACHE = {"Cache-Control": "no-cache"}  # revalidated (ETag) each load: a new version shows at once

router = APIRouter(include_in_schema=False)


@router.get("/")
async def page() -> HTMLResponse:
    return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"), headers=CACHE)


@router.get("/favicon.ico")
async def favicon() -> FileResponse:
    """What browsers (and /docs) ask every site for: the page's icon, not a 404 in the log."""
    return FileResponse(STATIC / "favicon.svg", media_type=ASSETS["favicon.svg"], headers=CACHE)


@router.get("/ui/evals.json")
async def evals(request: Request, _: Tenant) -> JSONResponse:
    """The saved evaluation reports, newest first, and the cascade curve if one was saved."""
    folder = Path(request.app.state.settings.data_dir) / "evals"
    reports: list[dict[str, Any]] = []
    cascade = None
    files = (
        sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        if folder.is_dir()
        else []
    )
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if path.name == "cascade.json":
            points = data.get("test") or data.get("train") or []
            cascade = [{"cold_share": p["cold_share"], "ndcg": p["ndcg@10"]} for p in points] or None
        elif isinstance(data, dict) and ("ndcg@10" in data or "gold@lead" in data):  # retrieval, answers
            reports.append(data)
    return JSONResponse({"evals": reports[:10], "cascade": cascade})


@router.get("/ui/{name}")
async def asset(name: str) -> FileResponse:
    if name not in ASSETS:
        raise NotFound(f"no asset {name!r}")
    return FileResponse(STATIC / name, media_type=ASSETS[name], headers=CACHE)
