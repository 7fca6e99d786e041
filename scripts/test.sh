#!/usr/bin/env bash
# Install what the tests need, bring up the real dev cluster (SLURM, munge, dockerd; root),
# then run every check: ruff, mypy, and all tests, end-to-end ones included.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e '.[test]'
# login shells the SSH tests run remote commands under (tests/test_ssh.py); root, as below
if ! command -v tcsh > /dev/null || ! command -v fish > /dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tcsh fish > /dev/null
fi
clusterctl dev-cluster up --nodes 4 --gpus-per-node 8
# verl's own validate_config judges the verl specs in the tests (tests/test_frameworks.py)
CLUSTERCTL_VERL_PYTHON=$(bash scripts/framework-judges.sh)
export CLUSTERCTL_VERL_PYTHON
ruff check clusterctl tests benchmarks
ruff format --check clusterctl tests benchmarks
mypy
python3 -m pytest -q --durations=40 "$@"
