#!/usr/bin/env bash
# A Python in which verl's own start-up validation can run (verl 0.9.1 with its dependencies,
# torch as the CPU build), apart from clusterctl's environment. Idempotent; prints the
# interpreter's path last. clusterctl finds it through CLUSTERCTL_VERL_PYTHON.
#   bash scripts/framework-judges.sh [DIR]
set -euo pipefail
dir=${1:-/var/tmp/clusterctl-judges/verl-0.9.1}
if [[ ! -f $dir/.complete ]]; then
  echo "framework judges: installing verl 0.9.1 and its dependencies into $dir" >&2
  python3 -m venv --clear --system-site-packages "$dir"
  # torch first, pinned to the CPU build when a local wheel is offered (PIP_FIND_LINKS);
  # verl's other requirements come from the index.
  "$dir/bin/pip" install -q torch==2.13.0 >&2
  "$dir/bin/pip" install -q verl==0.9.1 pillow >&2
  touch "$dir/.complete"
fi
echo "$dir/bin/python"
