"""``clusterctl doctor``: explain a failed job from its logs (signatures.py, scan.py)."""
