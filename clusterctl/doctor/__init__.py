"""``clusterctl doctor``: explain a failed job from its logs."""

from clusterctl.doctor.scan import Hit, scan_files, scan_lines
from clusterctl.doctor.signatures import SIGNATURES, Signature

__all__ = ["SIGNATURES", "Hit", "Signature", "scan_files", "scan_lines"]
