"""The search flow, read top to bottom in ``flow.py``: features → route → embed → retrieve → fuse → hydrate.

- ``features.py``, ``clauses.py``: what a query says (years, clause references, laws, ids, recency)
- ``route.py``, ``filters.py``: which tier(s) and legs answer it, under which filters
- ``retrieve.py``: one fan-out over the chosen tiers and legs
- ``relax.py``: the relaxation ladder and the hot → cold cascade (its threshold), behind one call
- ``fuse.py``: RRF / DBSF / convex fusion of legs and tiers
"""
