"""Render a resolved spec into a bundle: job.sbatch, a Dockerfile, the resolved spec."""

from clusterctl.render.bundle import Bundle, render_bundle, write_bundle

__all__ = ["Bundle", "render_bundle", "write_bundle"]
