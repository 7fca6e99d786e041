"""Lint rules: known multi-node failures refused before anything runs (see engine.py)."""
