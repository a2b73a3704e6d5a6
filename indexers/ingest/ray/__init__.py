"""The Ray engine for bulk ingestion: ``units.py`` cuts the input into units, ``engine.py`` runs
the workers (prepare, embed, build segments), ``tiers.py`` is what workers reach of the tiers,
``owner.py`` writes and acknowledges in the owner, ``pipeline.py`` runs a job end to end.

Only this room imports Ray; the in-process ingestion beside it (``indexers.ingest``) never
imports this room (an import-linter contract in pyproject.toml keeps it so)."""
