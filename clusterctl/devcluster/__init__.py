"""A real SLURM + Docker cluster on one host (``clusterctl dev-cluster``)."""
