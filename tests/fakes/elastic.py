"""An HTTP-level stand-in for the Elasticsearch 8.x REST API: records requests, scripts bulk items.

Only what the cold-tier adapter calls: index template, index exists/create, ``_bulk`` (NDJSON,
per-item statuses from a script), ``_msearch``, ``_search``, ``_count``. Responses carry the
``X-Elastic-Product`` header the official client checks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

HEADERS = {"X-Elastic-Product": "Elasticsearch"}


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: Any


@dataclass
class FakeElastic:
    bulk_script: list[list[int]] = field(default_factory=list)  # statuses per bulk call, in order
    hits: list[dict[str, Any]] = field(default_factory=list)  # _source documents _msearch returns
    requests: list[Recorded] = field(default_factory=list)
    index_exists: bool = False

    @property
    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/", self._info, methods=["GET", "HEAD"]),
                Route("/_index_template/{name}", self._ok, methods=["PUT"]),
                Route("/_bulk", self._bulk, methods=["POST", "PUT"]),
                Route("/_msearch", self._msearch, methods=["POST", "GET"]),
                Route("/{index}/_search", self._search, methods=["POST", "GET"]),
                Route("/{index}/_mget", self._mget, methods=["POST", "GET"]),
                Route("/{index}/_count", self._count, methods=["POST", "GET"]),
                Route("/{index}", self._index, methods=["HEAD", "PUT"]),
            ]
        )

    async def _record(self, request: Request) -> Recorded:
        raw = (await request.body()).decode()
        body: Any
        if request.url.path.endswith(("_bulk", "_msearch")):
            body = [json.loads(line) for line in raw.splitlines() if line.strip()]
        else:
            body = json.loads(raw) if raw else None
        rec = Recorded(request.method, request.url.path, dict(request.query_params), body)
        self.requests.append(rec)
        return rec

    def calls(self, suffix: str) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith(suffix)]

    async def _info(self, request: Request) -> Response:
        info = {
            "name": "fake",
            "cluster_name": "fake",
            "version": {"number": "8.15.0"},
            "tagline": "You Know, for Search",
        }
        return JSONResponse(info, headers=HEADERS)

    async def _ok(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse({"acknowledged": True}, headers=HEADERS)

    async def _index(self, request: Request) -> Response:
        await self._record(request)
        if request.method == "HEAD":
            return Response(status_code=200 if self.index_exists else 404, headers=HEADERS)
        self.index_exists = True
        return JSONResponse({"acknowledged": True, "index": request.path_params["index"]}, headers=HEADERS)

    async def _bulk(self, request: Request) -> Response:
        rec = await self._record(request)
        statuses = self.bulk_script.pop(0) if self.bulk_script else []
        items, i, n = [], 0, 0
        while i < len(rec.body):
            ((op, meta),) = rec.body[i].items()
            i += 1 if op == "delete" else 2
            status = statuses[n] if n < len(statuses) else (200 if op == "delete" else 201)
            n += 1
            item: dict[str, Any] = {"_index": meta.get("_index"), "_id": meta.get("_id"), "status": status}
            if status >= 300 and status != 404:
                kind = {409: "version_conflict_engine_exception", 429: "es_rejected_execution_exception"}
                item["error"] = {
                    "type": kind.get(status, "mapper_parsing_exception"),
                    "reason": f"scripted {status}",
                }
            items.append({op: item})
        errors = any(x[next(iter(x))]["status"] >= 300 for x in items)
        return JSONResponse({"took": 1, "errors": errors, "items": items}, headers=HEADERS)

    def _hits(self, k: int) -> dict[str, Any]:
        hits = [
            {"_id": f"{s['tenant']}/{s['chunk_id']}", "_score": 1.0 / (r + 1), "_source": s}
            for r, s in enumerate(self.hits[:k])
        ]
        return {"hits": {"total": {"value": len(hits), "relation": "eq"}, "hits": hits}}

    async def _msearch(self, request: Request) -> Response:
        rec = await self._record(request)
        bodies = rec.body[1::2]
        return JSONResponse(
            {"took": 1, "responses": [self._hits(b.get("size", 10)) for b in bodies]}, headers=HEADERS
        )

    async def _search(self, request: Request) -> Response:
        rec = await self._record(request)
        return JSONResponse(self._hits((rec.body or {}).get("size", 10)), headers=HEADERS)

    async def _mget(self, request: Request) -> Response:
        rec = await self._record(request)
        by_id = {f"{s['tenant']}/{s['chunk_id']}": s for s in self.hits}
        docs = [
            {"_id": i, "found": True, "_source": by_id[i]} if i in by_id else {"_id": i, "found": False}
            for i in rec.body["ids"]
        ]
        return JSONResponse({"docs": docs}, headers=HEADERS)

    async def _count(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse({"count": len(self.hits)}, headers=HEADERS)
