"""An HTTP-level stand-in for the Elasticsearch 8.x REST API: records requests, scripts bulk items.

Only what the cold-tier adapter calls: index template, index exists/create, ``_bulk`` (NDJSON,
per-item statuses from a script), ``_msearch``, ``_search``, ``_count``. Responses carry the
``X-Elastic-Product`` header the official client checks.

``stateful=True`` keeps what ``_bulk`` indexes (per index, by ``_id``; a scripted failure stores
nothing) and answers ``_search``/``_count``/``_mget`` from it, for the filters the adapter's
reads use (``bool.filter`` of ``term``/``terms``/``range``, ``match_all``) and its paging
(``sort`` by tenant and chunk id, ``search_after``). No scoring, no analysis: ``_msearch`` still
returns ``hits``. Enough for an ingestion engine to compare and write through it from other
processes (the Ray engine's workers), which a scripted fake cannot serve.
"""

from __future__ import annotations

import json
import operator
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
    stateful: bool = False
    docs: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # index → _id → _source

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
            index, _id = str(meta.get("_index")), str(meta.get("_id"))
            held = self.docs.setdefault(index, {})
            default = (200 if not self.stateful or _id in held else 404) if op == "delete" else 201
            status = statuses[n] if n < len(statuses) else default
            n += 1
            if self.stateful and status < 300:
                if op == "delete":
                    held.pop(_id, None)
                else:
                    held[_id] = rec.body[i - 1]
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
        body = rec.body or {}
        if not self.stateful:
            return JSONResponse(self._hits(body.get("size", 10)), headers=HEADERS)
        matching = self._matching(request.path_params["index"], body.get("query"))
        if "aggs" in body:
            aggregations = _aggregate(matching, body["aggs"])
            return JSONResponse({"hits": {"hits": []}, "aggregations": aggregations}, headers=HEADERS)
        found = sorted(((s["tenant"], s["chunk_id"]), i, s) for i, s in matching)
        after = tuple(body.get("search_after") or ())
        page = [x for x in found if not after or x[0] > after][: body.get("size", 10)]
        fields = body.get("_source")
        hits = [
            {"_id": i, "_score": None, "sort": list(key), "_source": _only(s, fields)} for key, i, s in page
        ]
        total = {"value": len(found), "relation": "eq"}
        return JSONResponse({"hits": {"total": total, "hits": hits}}, headers=HEADERS)

    def _matching(self, index: str, query: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
        query = query or {"match_all": {}}
        return [(i, s) for i, s in self.docs.get(index, {}).items() if _matches(s, query)]

    async def _mget(self, request: Request) -> Response:
        rec = await self._record(request)
        if self.stateful:
            held = self.docs.get(request.path_params["index"], {})
            docs = [{"_id": i, "found": i in held, "_source": held.get(i)} for i in rec.body["ids"]]
            return JSONResponse({"docs": docs}, headers=HEADERS)
        by_id = {f"{s['tenant']}/{s['chunk_id']}": s for s in self.hits}
        docs = [
            {"_id": i, "found": True, "_source": by_id[i]} if i in by_id else {"_id": i, "found": False}
            for i in rec.body["ids"]
        ]
        return JSONResponse({"docs": docs}, headers=HEADERS)

    async def _count(self, request: Request) -> Response:
        rec = await self._record(request)
        if self.stateful:
            found = self._matching(request.path_params["index"], (rec.body or {}).get("query"))
            return JSONResponse({"count": len(found)}, headers=HEADERS)
        return JSONResponse({"count": len(self.hits)}, headers=HEADERS)


_BOUNDS = {"gte": operator.ge, "lte": operator.le, "gt": operator.gt, "lt": operator.lt}


def _matches(source: dict[str, Any], query: dict[str, Any]) -> bool:
    ((kind, arg),) = query.items()
    if kind == "match_all":
        return True
    if kind == "bool":
        return all(_matches(source, q) for q in [*arg.get("filter", []), *arg.get("must", [])])
    ((name, value),) = arg.items()
    held = source.get(name)
    values = held if isinstance(held, list) else [held]  # a keyword array matches on any element
    if kind == "term":
        return value in values
    if kind == "terms":
        return any(v in value for v in values)
    if kind == "range":
        return held is not None and all(_BOUNDS[op](held, bound) for op, bound in value.items())
    if kind == "prefix":  # on a lowercase-normalized keyword sub-field ("title.raw")
        whole = source.get(name.split(".")[0]) or ""
        return bool(whole.lower().startswith(value["value"].lower()))
    raise ValueError(f"the fake does not answer {kind} queries")


def _aggregate(matching: list[tuple[str, dict[str, Any]]], aggs: dict[str, Any]) -> dict[str, Any]:
    """What the listing asks: a ``composite`` of one ``terms`` source (its ``after`` and ``size``)
    with a ``top_hits`` sub-aggregation, and an exact ``cardinality``."""
    out: dict[str, Any] = {}
    for name, agg in aggs.items():
        if "cardinality" in agg:
            out[name] = {"value": len({s.get(agg["cardinality"]["field"]) for _, s in matching})}
            continue
        ((key, source),) = agg["composite"]["sources"][0].items()
        field_ = source["terms"]["field"]
        after = (agg["composite"].get("after") or {}).get(key)
        groups: dict[str, list[dict[str, Any]]] = {}
        for _, s in matching:
            if after is None or s[field_] > after:
                groups.setdefault(s[field_], []).append(s)
        buckets = []
        for value in sorted(groups)[: agg["composite"]["size"]]:
            first = min(groups[value], key=lambda s: s.get("n", 0))
            hit = {"_source": _only(first, agg["aggs"]["first"]["top_hits"]["_source"])}
            count, hits = len(groups[value]), {"hits": {"hits": [hit]}}
            buckets.append({"key": {key: value}, "doc_count": count, "first": hits})
        out[name] = {"buckets": buckets}
    return out


def _only(source: dict[str, Any], fields: list[str] | None) -> dict[str, Any]:
    return {k: v for k, v in source.items() if fields is None or k in fields}
