"""clusterctl: one YAML spec for multi-node RL post-training on SLURM + Docker."""

__version__ = "0.1.0"
