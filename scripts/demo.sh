#!/usr/bin/env bash
# Install clusterctl, bring up the local SLURM + Docker dev cluster (root), and run the
# CPU example end to end: 3 nodes, one container each, Ray, self-test, workload.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q '.[runtime]'
clusterctl dev-cluster up --nodes 4
mkdir -p demo-run
cd demo-run
clusterctl submit ../examples/cpu-dev-cluster.yaml --wait
run="$(ls -td clusterctl-logs/*/ | head -1)"
echo "demo: the self-test before the workload:"
grep -E 'nodes joined|selftest:' "${run}batch.log"
echo "demo: the workload's output:"
cat "$(ls -td clusterctl-logs/*/ | head -1)workload.log"
echo "demo: every log of the job is in demo-run/$(ls -td clusterctl-logs/*/ | head -1)"
