"""The job spec: models, presets, loading with line-accurate errors."""

from clusterctl.spec.loader import LoadedSpec, load_spec, load_spec_text
from clusterctl.spec.models import JobSpec

__all__ = ["JobSpec", "LoadedSpec", "load_spec", "load_spec_text"]
