"""What a spec's job needs from every node, for the judges (verify and the job's preflight)."""

from __future__ import annotations

import json

from clusterctl.image.archive import read_image_id
from clusterctl.spec.models import JobSpec
from clusterctl.spec.presets import PRESETS
from clusterctl.verify.judges import Expect


def expectations(spec: JobSpec, live_jobs: frozenset[str] | None) -> Expect:
    """The Expect of SPEC's job; LIVE_JOBS: the SLURM jobs still running (None: unknown).
    With container.pull: load, the tarball's ID file (when readable here) names the image."""
    preset = PRESETS[spec.hardware.preset]
    c = spec.container
    loads = c.pull == "load" and c.load_from is not None
    return Expect(
        vendor=preset.vendor,
        gpus_per_node=spec.slurm.gpus_per_node or 0,
        image=spec.container.image,
        fabric=spec.network.fabric or preset.default_fabric,
        hcas=tuple(spec.network.hcas),
        gid_index=spec.network.gid_index,
        live_jobs=live_jobs,
        image_id=c.image_id or (read_image_id(c.load_from) if loads and c.load_from else None),
        image_reloads=loads,
    )


def expect_json(spec: JobSpec) -> str:
    """The expectations the job carries (judges.expect_from_json reads them)."""
    e = expectations(spec, None)
    return json.dumps(
        {
            "vendor": e.vendor,
            "gpus_per_node": e.gpus_per_node,
            "image": e.image,
            "fabric": e.fabric,
            "hcas": list(e.hcas),
            "gid_index": e.gid_index,
            "image_id": spec.container.image_id,
        },
        sort_keys=True,
    )
