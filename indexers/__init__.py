"""The storage layer: how documents get into the tiers and how the tiers are searched.

Nothing here reads settings; every component takes explicit constructor arguments.
"""
