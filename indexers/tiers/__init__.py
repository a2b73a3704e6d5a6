"""Storage tiers: every engine behind the seams of ``base.py``; blocking ones through ``threaded.py``."""
