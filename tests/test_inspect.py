"""`validate --inspect-image`: versions read from a real image with the real Docker engine
(the dev cluster's clusterctl/dev:latest), judged against the spec's versions:."""

from __future__ import annotations

import pytest

from clusterctl.spec import load_spec
from clusterctl.spec.inspect import judge_image_versions
from tests.conftest import ROOT, run_cli

CPU = ROOT / "examples" / "cpu-dev-cluster.yaml"


def test_judge_on_captured_reports() -> None:
    spec = load_spec(CPU, ["versions.torch=2.13.0", "versions.vllm=0.11.0"]).spec
    rocm_image = {"python": "3.11.9", "ray": "2.60.0", "torch": "2.13.0+rocm7.0", "rocm": "7.0.2"}
    found = dict(judge_image_versions(spec, rocm_image))
    assert set(found) == {("versions", "vllm")}
    assert "has no vllm" in found[("versions", "vllm")]
    assert judge_image_versions(load_spec(CPU).spec, rocm_image) == []


@pytest.mark.cluster
def test_inspect_reads_the_real_image(dev_cluster: None) -> None:
    ok = run_cli("validate", str(CPU), "--inspect-image")
    assert ok.returncode == 0, ok.stderr
    assert "clusterctl/dev:latest holds python 3.11" in ok.stderr and "ray 2.60.0" in ok.stderr
    skew = run_cli("validate", str(CPU), "--inspect-image", "--set", "versions.ray=2.59.0")
    assert skew.returncode == 2
    assert (
        "versions.ray: ray 2.59.0 is declared, but the image clusterctl/dev:latest has 2.60.0"
        in (skew.stderr)
    )


@pytest.mark.cluster
def test_inspect_of_a_missing_image_is_one_line(dev_cluster: None) -> None:
    result = run_cli("validate", str(CPU), "--inspect-image", "--set", "container.image=nosuch:1")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "error: cannot read versions from nosuch:1: Error response from daemon: No such image: "
        "nosuch:1"
    )
