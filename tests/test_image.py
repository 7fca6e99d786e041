"""Image build stream, image tarball ID files, and the bundle a build writes (pure parts; the
real engine runs in tests/e2e/test_lifecycle.py)."""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import pytest

from clusterctl.errors import UsageError
from clusterctl.image.archive import check_tarball, id_file, read_image_id, tarball_images
from clusterctl.image.build import context_tar, parse_build_stream
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
    # an ID file that holds no ID must never switch the check off
    id_file(tarball).write_text("latest\n")
    with pytest.raises(UsageError, match="does not hold an image ID"):
        read_image_id(tarball)


IMAGES = Path(__file__).parent / "fixtures" / "image"
IMAGE_A = "sha256:45aeb78efc41c8be4b6710a733188333a71267dfafcfa1ab1cb2491a109027ba"
IMAGE_B = "sha256:8d0ae38cd389b2a600ee06df9ab3120344d90d77685ba801121b74e59d1cc6e8"


def test_a_tarballs_images_are_read_from_its_own_manifest() -> None:
    assert tarball_images(IMAGES / "two.tar") == {
        IMAGE_A: ("clusterctl/tiny-a:1",),
        IMAGE_B: ("clusterctl/tiny-b:1",),
    }
    check_tarball(IMAGES / "two.tar", "clusterctl/tiny-b:1", IMAGE_B)
    check_tarball(IMAGES / "two.tar", None, IMAGE_A)


@pytest.mark.parametrize(
    "tarball, image, want, said",
    [
        # issue 20 item 14: the tag in the tarball is another image than the ID file's
        ("retagged.tar", "clusterctl/tiny-a:1", IMAGE_A, "do not belong together"),
        ("two.tar", "clusterctl/tiny-a:1", IMAGE_B, "tags clusterctl/tiny-a:1 as sha256:45aeb"),
        ("two.tar", "clusterctl/other:2", None, "does not tag clusterctl/other:2"),
    ],
)
def test_a_tarball_that_would_retag_another_image_is_refused_before_loading(
    tarball: str, image: str, want: str | None, said: str
) -> None:
    with pytest.raises(UsageError, match=re.escape(said)):
        check_tarball(IMAGES / tarball, image, want)


def test_a_file_that_is_not_a_docker_save_tarball_is_named(tmp_path: Path) -> None:
    junk = tmp_path / "x.tar"
    junk.write_bytes(b"not a tarball")
    with pytest.raises(UsageError, match=r"cannot read .* as a docker save tarball"):
        tarball_images(junk)


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


def test_the_engine_receives_the_dockerfile_and_the_wheelhouse_only(tmp_path: Path) -> None:
    """A spec in $HOME must not send ~/.ssh to the Docker engine (issue 20, low)."""
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_ed25519").write_text("a private key\n")
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "x-1.0-py3-none-any.whl").write_bytes(b"wheel")
    out = io.BytesIO()
    context_tar("FROM scratch\n", tmp_path, ("wheels",), out)
    with tarfile.open(fileobj=out) as tar:
        names = sorted(tar.getnames())
        dockerfile = tar.extractfile("Dockerfile")
        assert dockerfile is not None and dockerfile.read() == b"FROM scratch\n"
    assert names == ["Dockerfile", "wheels", "wheels/x-1.0-py3-none-any.whl"]
