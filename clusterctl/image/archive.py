"""Image tarballs on shared storage, for clusters without a registry.

``save`` writes ``docker save`` output (gzip-compressed when the name ends in .gz) and, beside
it, ``NAME.id``: the image ID on one line. The job's preflight (``container.pull: load``)
loads the tarball on every node whose image under the tag is missing or is not that ID, and
the preflight judges then fail any node that still holds another image.
"""

from __future__ import annotations

import gzip
import os
import re
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
    """The ID that `clusterctl image save` wrote beside TARBALL, None when there is none."""
    try:
        text = id_file(tarball).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if IMAGE_ID.match(text) else None


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
    id_tmp = id_file(path).with_name(f".{id_file(path).name}.tmp")
    id_tmp.write_text(found.id + "\n", encoding="ascii")
    os.replace(id_tmp, id_file(path))
    return Saved(path, image, found.id, path.stat().st_size)


def load_image(path: Path, image: str | None, docker_host: str | None = None) -> str:
    """docker load PATH; the loaded image's ID, checked against PATH.id when there is one."""
    client = docker_client(docker_host)
    want = read_image_id(path)
    try:
        with path.open("rb") as handle:  # the engine reads gzip itself
            loaded = client.images.load(handle)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except Exception as exc:
        raise UsageError(f"docker load -i {path} failed: {exc}") from None
    ids = [i.id for i in loaded]
    got = _get(client, image).id if image else (ids[0] if ids else "")
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
