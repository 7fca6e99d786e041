#!/usr/bin/env bash
# Install what the tests need, bring up the real dev cluster (SLURM, munge, dockerd; root),
# then run every check: ruff, mypy, and all tests, end-to-end ones included.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e '.[test]'
# login shells the SSH tests run remote commands under (tests/test_ssh.py), bubblewrap, the
# sandbox import runs users' scripts in (tests/test_dryrun.py), tmux, the terminal the live
# view is watched in, and Chromium, which renders the job report (tests/e2e/test_watching.py);
# root, as below
if ! command -v tcsh > /dev/null || ! command -v fish > /dev/null || ! command -v bwrap > /dev/null ||
  ! command -v tmux > /dev/null || ! command -v chromium > /dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tcsh fish bubblewrap tmux \
    chromium > /dev/null
fi
clusterctl dev-cluster up --nodes 4 --gpus-per-node 8
# verl's own validate_config judges the verl specs in the tests (tests/test_frameworks.py)
CLUSTERCTL_VERL_PYTHON=$(bash scripts/framework-judges.sh)
export CLUSTERCTL_VERL_PYTHON
ruff check clusterctl tests benchmarks
ruff format --check clusterctl tests benchmarks
mypy
if (($#)); then
  exec python3 -m pytest -q --durations=40 "$@"
fi
# Test files that start no daemon, job, container or Ray of their own: renders, validation,
# the frameworks' own judges (each a Python process of its own). They run on both cores
# (pytest-xdist, a file per worker) at the lowest CPU priority, beside the rest, which run one at
# a time: those share the one dev cluster, and their deadlines assume they have the machine to
# themselves. At nice 19 the daemon-free files take only what the cluster's tests leave idle while
# they wait on SLURM, Docker and Ray (measured here: the cluster's tests took 1794 s beside them,
# 1765 s alone; the daemon-free files ended after 721 s).
ON_BOTH_CORES=(
  tests/test_cli.py tests/test_docs.py tests/test_doctor.py tests/test_doctor_corpus.py
  tests/test_dryrun.py tests/test_import_hostile.py
  tests/test_frameworks.py tests/test_gpu_real_output.py tests/test_hardening.py
  tests/test_import.py tests/test_lint.py tests/test_logical_gpus.py tests/test_memory.py
  tests/test_payload.py tests/test_profiles.py tests/test_property.py tests/test_real_configs.py
  tests/test_reference.py tests/test_render.py tests/test_scale_fit.py
  tests/test_script_functions.py tests/test_spec.py tests/test_stall.py
  tests/test_verl_cpu_patches.py
)
daemon_free_log=$(mktemp)
nice -n 19 python3 -m pytest -q --durations=30 -n 2 --dist loadfile "${ON_BOTH_CORES[@]}" \
  > "$daemon_free_log" 2>&1 &
daemon_free=$!
trap 'kill "$daemon_free" 2> /dev/null || true; rm -f "$daemon_free_log"' EXIT
cluster_rc=0
python3 -m pytest -q --durations=30 "${ON_BOTH_CORES[@]/#/--ignore=}" || cluster_rc=$?
daemon_free_rc=0
wait "$daemon_free" || daemon_free_rc=$?
echo "== the daemon-free test files (run beside the ones above, at nice 19)"
cat "$daemon_free_log"
if ((cluster_rc)); then exit "$cluster_rc"; fi
exit "$daemon_free_rc"
