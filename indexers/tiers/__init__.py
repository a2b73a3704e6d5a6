"""Storage tiers: every engine behind the one ``Tier`` protocol of ``base.py``."""
