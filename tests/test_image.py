"""Image build stream, image tarball ID files, and the bundle a build writes (pure parts; the
real engine runs in tests/e2e/test_lifecycle.py)."""

from __future__ import annotations

import json
from pathlib import Path

from clusterctl.image.archive import id_file, read_image_id
from clusterctl.image.build import parse_build_stream
from clusterctl.render.bundle import add_file, is_clusterctl_bundle, render_bundle, write_bundle
from clusterctl.spec import load_spec
from tests.conftest import ROOT

FIXTURES = Path(__file__).parent / "fixtures" / "build"


def stream(name: str) -> list[dict[str, object]]:
    return json.loads((FIXTURES / name).read_text())


def test_a_real_build_stream_reads_as_steps_output_and_the_image_id() -> None:
    events = list(parse_build_stream(stream("engine-20.10-build-ok.json")))
    steps = [(e.step, e.steps, e.text) for e in events if e.kind == "step"]
    assert steps == [
        (1, 3, "FROM clusterctl/debian-base:bookworm"),
        (2, 3, "RUN echo hello-from-step-2"),
        (3, 3, "ENV A=1"),
    ]
    assert "hello-from-step-2" in [e.text for e in events if e.kind == "output"]
    ids = [e.text for e in events if e.kind == "id"]
    assert ids == ["sha256:b05ed6eab2b491947b82b10dc7498457fdb0ce0cd948a429d0b7986a9f31db5b"]
    assert not [e for e in events if e.kind == "error"]


def test_a_failed_build_stream_ends_in_the_engines_error() -> None:
    events = list(parse_build_stream(stream("engine-20.10-build-fail.json")))
    assert events[-1].kind == "error"
    assert events[-1].text == "The command '/bin/sh -c false' returned a non-zero code: 1"
    assert [e.step for e in events if e.kind == "step"][-1] == 3


def test_the_id_file_beside_a_tarball_is_read_only_when_it_holds_an_image_id(
    tmp_path: Path,
) -> None:
    tarball = tmp_path / "verl.tar.gz"
    assert id_file(tarball) == tmp_path / "verl.tar.gz.id"
    assert read_image_id(tarball) is None
    id_file(tarball).write_text("sha256:" + "0f" * 32 + "\n")
    assert read_image_id(tarball) == "sha256:" + "0f" * 32
    id_file(tarball).write_text("latest\n")
    assert read_image_id(tarball) is None


def test_a_bundle_with_a_file_added_is_still_an_unchanged_clusterctl_bundle(
    tmp_path: Path,
) -> None:
    spec = load_spec(ROOT / "examples" / "cpu-dev-cluster.yaml").spec
    bundle = add_file(render_bundle(spec), "image.json", '{"id": "sha256:00"}\n')
    target = write_bundle(bundle, tmp_path / "b")
    assert (target / "image.json").read_text() == '{"id": "sha256:00"}\n'
    manifest = json.loads((target / "manifest.json").read_text())
    assert "image.json" in manifest["files"] and "manifest.json" not in manifest["files"]
    assert is_clusterctl_bundle(target)
    (target / "image.json").write_text("{}")
    assert not is_clusterctl_bundle(target)
