"""Image tarballs on shared storage, for clusters without a registry.

``save`` writes ``docker save`` output (gzip-compressed when the name ends in .gz) and, beside
it, ``NAME.id``: the image ID on one line. The job's preflight (``container.pull: load``)
loads the tarball on every node whose image under the tag is missing or is not that ID, and
the preflight judges then fail any node that still holds another image.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterctl.errors import UsageError
from clusterctl.image.build import docker_client

IMAGE_ID = re.compile(r"^sha256:[0-9a-f]{64}$")
CHUNK = 1 << 20


def id_file(tarball: str | Path) -> Path:
    """Where the image ID of TARBALL is written: NAME.id beside it."""
    return Path(f"{tarball}.id")


def read_image_id(tarball: str | Path) -> str | None:
    """The ID that `clusterctl image save` wrote beside TARBALL, None when there is no ID
    file; one that holds no image ID is an error (it must never switch the check off)."""
    path = id_file(tarball)
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not IMAGE_ID.match(text):
        raise UsageError(
            f"{path} does not hold an image ID (sha256:...); write it again with "
            "clusterctl image save"
        )
    return text


def _familiar(ref: str) -> str:
    """A reference as Docker shows it: no docker.io/library/ prefix, :latest when untagged."""
    ref = ref.removeprefix("docker.io/").removeprefix("library/")
    return ref if ":" in ref.rsplit("/", 1)[-1] or "@" in ref else f"{ref}:latest"


def tarball_images(path: Path) -> dict[str, tuple[str, ...]]:
    """Image ID -> its tags, from the tarball's own manifest.json (docker save's format,
    legacy and OCI layout alike: Config names the config blob, whose digest is the ID)."""
    try:
        with tarfile.open(path, "r:*") as tar:
            member = tar.extractfile("manifest.json")
            entries = json.load(member) if member else None
    except KeyError:
        entries = None
    except (OSError, tarfile.TarError, ValueError) as exc:
        raise UsageError(f"cannot read {path} as a docker save tarball: {exc}") from None
    if not isinstance(entries, list):
        raise UsageError(f"{path} has no manifest.json: it is not a docker save tarball")
    images: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        digest = Path(str(entry.get("Config", ""))).name.removesuffix(".json")
        tags = tuple(_familiar(t) for t in entry.get("RepoTags") or ())
        images["sha256:" + digest] = images.get("sha256:" + digest, ()) + tags
    return images


def check_tarball(path: Path, image: str | None, want: str | None) -> None:
    """Before anything is loaded: the tarball holds the image its ID file names, and loading
    it gives IMAGE's tag to that image (docker load retags silently)."""
    images = tarball_images(path)
    held = ", ".join(f"{i[:19]} ({' '.join(t) or 'untagged'})" for i, t in images.items())
    if want and want not in images:
        raise UsageError(
            f"{path} holds {held or 'no image'}, but {id_file(path)} says {want}: the tarball "
            "and its ID file do not belong together"
        )
    if image:
        wanted_tag = _familiar(image)
        tagged = [i for i, tags in images.items() if wanted_tag in tags]
        if not tagged:
            raise UsageError(f"{path} does not tag {image} (it holds {held or 'no image'})")
        if want and tagged != [want]:
            raise UsageError(
                f"{path} tags {image} as {tagged[0]}, but {id_file(path)} says {want}: "
                f"loading it would point {image} at another image; nothing was loaded"
            )


@dataclass(frozen=True)
class Saved:
    path: Path
    image: str
    image_id: str
    size: int


def save_image(image: str, path: Path, docker_host: str | None = None) -> Saved:
    """docker save IMAGE into PATH (atomically: a partial tarball never has the final name),
    then PATH.id."""
    client = docker_client(docker_host)
    found = _get(client, image)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as raw:
            out: Any = raw
            if path.name.endswith(".gz"):
                # level 1: images are mostly compressed layers already; speed matters more
                out = gzip.GzipFile(filename="", mode="wb", compresslevel=1, fileobj=raw, mtime=0)
            try:
                # by the name asked for: the tarball then carries that tag (an image's
                # first tag may be another one)
                for chunk in client.api.get_image(image, chunk_size=CHUNK):
                    out.write(chunk)
            finally:
                if out is not raw:
                    out.close()
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # a fresh temporary name (O_EXCL): a link planted at a fixed name is never followed
    fd, id_tmp = tempfile.mkstemp(prefix=f".{id_file(path).name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(found.id + "\n")
    os.chmod(id_tmp, 0o644 & ~_umask())
    os.replace(id_tmp, id_file(path))
    return Saved(path, image, found.id, path.stat().st_size)


def load_image(path: Path, image: str | None, docker_host: str | None = None) -> str:
    """docker load PATH; the loaded image's ID, checked against PATH.id when there is one."""
    client = docker_client(docker_host)
    want = read_image_id(path)
    check_tarball(path, image, want)
    try:
        with path.open("rb") as handle:  # the engine reads gzip itself
            loaded = client.images.load(handle)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except Exception as exc:
        raise UsageError(f"docker load -i {path} failed: {exc}") from None
    ids = [i.id for i in loaded]
    if image:
        got: str = _get(client, image).id
    else:  # the ID file's image when the tarball held several
        got = want if want and want in ids else (ids[0] if ids else "")
    if want and got != want:
        raise UsageError(
            f"after loading {path}, {image or 'the image'} is {got}, but {id_file(path)} says "
            f"{want}: the tarball and its ID file do not belong together"
        )
    return got


def _get(client: Any, image: str) -> Any:
    from docker.errors import ImageNotFound

    try:
        return client.images.get(image)
    except ImageNotFound:
        raise UsageError(f"image {image} is not in this Docker engine") from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
