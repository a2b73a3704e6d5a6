"""Evaluation: retrieval on BEIR-layout sets (``retrieval``), answers on answer sets
(``answers``), and the public collections to run them on (``datasets``)."""
