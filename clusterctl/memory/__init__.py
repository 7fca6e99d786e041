"""The GPU memory plan: what each role holds on each GPU, phase by phase, against the GPU's
memory, before a job is submitted (`clusterctl plan`, lint rule gpu-memory)."""
