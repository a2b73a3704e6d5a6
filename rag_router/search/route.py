"""QueryFeatures → Route: which tiers, which filters, which leg weights, and why. Pure.

The policy (weights, the cascade threshold, the clause field) is data: prompts/routing.yaml.

    recency words                 → hot only
    a date range or years         → a date/year filter; tiers by where the range meets the hot window
    a clause ("Article 17")       → a filter on the clause field + more weight on the lexical leg
    a law named at the clause     → a filter on ``law`` too ("刑法第二十条": law 刑法, article 20)
    identifiers, quoted phrases   → more weight on the lexical leg; both tiers
    nothing of the above          → cascade: hot first, cold only when hot's best match is weak

Implied filters are soft: an implied time filter keeps the documents that carry no date (one
dated only in its text) and ranks them after the dated matches (``Filters.or_missing``,
rag_router/search/soft.py); any implied filter is dropped, and said so, when it leaves nothing.
Filters given in the request are never softened nor dropped, and win over implied ones on the
same field.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from indexers.records import TierName
from indexers.tiers.query import Filters, Range
from rag_router.search.features import QueryFeatures
from rag_router.settings import PROMPTS

RouteName = Literal["auto", "hot", "cold", "both"]
_FIXED: dict[str, tuple[TierName, ...]] = {"hot": ("hot",), "cold": ("cold",), "both": ("hot", "cold")}


@dataclass(frozen=True, slots=True)
class Policy:
    cascade_min_score: float = 0.6
    weights: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    clause_fields: Mapping[str, str] = field(
        default_factory=lambda: {"article": "article", "section": "section", "amendment": "amendment"}
    )
    law_field: str = "law"
    foreign_dense_weight: float = 0.0
    min_hits_with_implied_filters: int = 1
    relax_first: tuple[str, ...] = ("section", "law")
    undated_factor: float = 0.8  # an undated hit kept by an implied time filter: its score × this

    @classmethod
    def load(cls, path: Path = PROMPTS / "routing.yaml") -> Policy:
        raw: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
        values = {f.name: raw[f.name] for f in dataclasses.fields(cls) if f.name in raw}
        if "relax_first" in values:
            values["relax_first"] = tuple(values["relax_first"])
        return cls(**values)

    def weights_for(self, kind: str) -> dict[str, float]:
        return dict(self.weights.get(kind) or self.weights.get("default") or {})


@dataclass(frozen=True, slots=True)
class Route:
    tiers: tuple[TierName, ...]
    filters: Filters  # explicit and implied
    relaxed: Filters  # explicit only: what is searched when the implied filters leave nothing
    weights: Mapping[str, float]
    reasons: tuple[str, ...]
    cascade: bool = False  # hot first; cold only when hot's evidence is weak
    features: QueryFeatures | None = None

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    @property
    def searched(self) -> str | None:
        """The query less its instructions (None: no features were read)."""
        return self.features.searched_text if self.features else None

    @property
    def has_implied_filters(self) -> bool:
        return self.filters != self.relaxed


def plan(
    features: QueryFeatures | None,
    requested: RouteName,
    explicit: Filters,
    *,
    policy: Policy,
    today: dt.date,
    hot_window_days: int,
) -> Route:
    """The route for one query. ``explicit`` are the request's own filters (never dropped)."""
    if requested != "auto" or features is None:  # tiers as asked, no implied filters
        reasons = [f"route {requested!r} requested"]
        weights = _weights(features, policy, reasons) if features else policy.weights_for("default")
        return Route(
            _FIXED.get(requested, ("hot", "cold")),
            explicit,
            explicit,
            weights,
            tuple(reasons),
            features=features,
        )
    reasons = list(f"note: {n}" for n in features.notes)
    filters = _implied_time(features, explicit, reasons)
    filters = _implied_clause(features, filters, policy, reasons)
    weights = _weights(features, policy, reasons)
    tiers, cascade = _tiers(features, filters, today, hot_window_days, reasons)
    return Route(tiers, filters, explicit, weights, tuple(reasons), cascade, features)


def _weights(features: QueryFeatures, policy: Policy, reasons: list[str]) -> dict[str, float]:
    """Leg weights from what the query is, whichever tiers it searches: a clause, an identifier
    or a quoted phrase asks for lexical precision."""
    for kind, present in (
        ("clause", features.clauses),
        ("identifier", features.identifiers),
        ("quoted", features.quoted),
    ):
        if present:
            if kind == "clause" and features.language == "zh" and "clause_zh" in policy.weights:
                kind = "clause_zh"  # a Chinese clause number is no term of its own (routing.yaml)
            weights = policy.weights_for(kind)
            reasons.append(f"{kind} → lexical weight {weights.get('lexical', 1.0):g}")
            return weights
    return policy.weights_for("default")


def _implied_time(features: QueryFeatures, explicit: Filters, reasons: list[str]) -> Filters:
    implied: Range | None = None
    key = "date"
    if features.date_range is not None:
        r = features.date_range
        implied = Range(gte=r.gte, lte=r.lte)
    elif features.years:
        key = "year"
        implied = Range(gte=min(features.years), lte=max(features.years))
    if implied is None:
        return explicit
    if explicit.date is not None or explicit.year is not None:
        reasons.append(f"explicit time filter wins over the implied {key} filter")
        return explicit
    reasons.append(f"implied {key} filter {_show(implied)}, undated documents kept")
    soft = frozenset({"year", "date"})
    if key == "year":
        return dataclasses.replace(explicit, year=implied, or_missing=soft)
    # A document with a year and no date must still be in the range's years.
    years = Range(
        gte=implied.gte.year if implied.gte else None, lte=implied.lte.year if implied.lte else None
    )
    return dataclasses.replace(explicit, date=implied, year=years, or_missing=soft)


def _implied_clause(features: QueryFeatures, filters: Filters, policy: Policy, reasons: list[str]) -> Filters:
    keywords = dict(filters.keywords)
    for kind in dict.fromkeys(c.kind for c in features.clauses):
        name = policy.clause_fields.get(kind, kind)
        if name in filters.keywords:
            reasons.append(f"explicit {name} filter wins over the clause reference")
            continue
        values = tuple(dict.fromkeys(c.label for c in features.clauses if c.kind == kind))
        reasons.append(f"clause reference → {name} in {list(values)}")
        keywords[name] = values
    if features.laws and keywords != filters.keywords:  # the law belongs to an implied clause
        name = policy.law_field
        if name in filters.keywords:
            reasons.append(f"explicit {name} filter wins over the law named in the query")
        else:
            keywords[name] = tuple(dict.fromkeys(v for law in features.laws for v in law.names))
            reasons.append(f"law named → {name} {' / '.join(law.text for law in features.laws)}")
    return dataclasses.replace(filters, keywords=keywords) if keywords != filters.keywords else filters


def _tiers(
    features: QueryFeatures, filters: Filters, today: dt.date, hot_window_days: int, reasons: list[str]
) -> tuple[tuple[TierName, ...], bool]:
    window_start = today - dt.timedelta(days=hot_window_days)
    lo, hi = _bounds(filters)
    if lo is not None or hi is not None:
        if hi is not None and hi < window_start:
            reasons.append(f"time range ends before the hot window ({window_start}) → cold")
            if filters.or_missing:  # undated documents are placed hot
                reasons.append("undated documents are hot → hot too")
                return ("hot", "cold"), False
            return ("cold",), False
        if lo is not None and lo >= window_start:
            reasons.append(f"time range inside the hot window (from {window_start}) → hot")
            return ("hot",), False
        reasons.append("time range spans the hot window's edge → hot and cold")
        return ("hot", "cold"), False
    if features.recency:
        reasons.append("recency words → hot")
        return ("hot",), False
    if features.clauses or features.identifiers or features.quoted:
        reasons.append("precise reference → hot and cold")
        return ("hot", "cold"), False
    reasons.append("no routing features → cascade: hot first, cold if hot's match is weak")
    return ("hot", "cold"), True


def _bounds(filters: Filters) -> tuple[dt.date | None, dt.date | None]:
    if filters.date is not None:
        r = filters.date
        return r.gte or r.gt, r.lte or r.lt
    if filters.year is not None:
        r = filters.year
        lo = r.gte if r.gte is not None else (r.gt + 1 if r.gt is not None else None)
        hi = r.lte if r.lte is not None else (r.lt - 1 if r.lt is not None else None)
        return (dt.date(lo, 1, 1) if lo else None), (dt.date(hi, 12, 31) if hi else None)
    return None, None


def _show(r: Range) -> str:
    def fmt(v: Any) -> str:
        return v.isoformat() if isinstance(v, dt.date) else str(v)

    return f"[{fmt(r.gte) if r.gte is not None else '…'}, {fmt(r.lte) if r.lte is not None else '…'}]"
