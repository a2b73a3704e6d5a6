"""Ingestion: loading files (``load.py``, ``formats.py`` for PDF/HTML/Markdown), the pipeline into
the tiers (``pipeline.py``), background jobs (``jobs.py``) and moving aged documents hot → cold
(``retier.py``); the Ray engine for bulk runs has a room of its own (``ray/``)."""
