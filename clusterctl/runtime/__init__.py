"""Code that runs inside the job's containers (embedded into job.sbatch by the renderer)."""
