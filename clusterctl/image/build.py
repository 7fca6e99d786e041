"""Build the spec's image with the Docker engine (the Docker SDK), step by step.

The Dockerfile is the one ``render`` puts into the bundle; the build context is a directory
the user names (the spec's directory by default), which holds the wheelhouse for offline
builds (``container.build.wheelhouse``).
"""

from __future__ import annotations

import importlib
import io
import re
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from clusterctl.errors import UsageError

STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")


@dataclass(frozen=True)
class BuildEvent:
    """One line of the engine's build stream: a step starting, its output, or the end."""

    kind: str  # "step", "output", "error", "id"
    text: str
    step: int = 0
    steps: int = 0


def parse_build_stream(chunks: Iterable[dict[str, Any]]) -> Iterator[BuildEvent]:
    """The engine's decoded /build stream (``{"stream": ...}``, ``{"error": ...}``,
    ``{"aux": {"ID": ...}}``) as events."""
    for chunk in chunks:
        if "error" in chunk:
            detail = chunk.get("errorDetail") or {}
            yield BuildEvent("error", str(detail.get("message") or chunk["error"]).strip())
        elif "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
            yield BuildEvent("id", str(chunk["aux"]["ID"]))
        elif "stream" in chunk:
            for line in str(chunk["stream"]).splitlines():
                if not line.strip():
                    continue
                found = STEP.match(line)
                if found:
                    step, steps = int(found.group(1)), int(found.group(2))
                    yield BuildEvent("step", found.group(3), step, steps)
                else:
                    yield BuildEvent("output", line)
        elif "status" in chunk:  # pulling a base image
            yield BuildEvent("output", str(chunk["status"]))


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    tags: tuple[str, ...]
    steps: int


def docker_client(docker_host: str | None = None) -> Any:
    """A Docker SDK client for DOCKER_HOST (or the given host), or a UsageError saying why."""
    try:
        # through importlib: mypy would take the repository's docker/ folder for the SDK
        docker: Any = importlib.import_module("docker")
    except ImportError:
        raise UsageError(
            "this command needs the Docker SDK: pip install 'clusterctl[runtime]'"
        ) from None
    try:
        client = docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
        client.ping()
    except Exception as exc:
        raise UsageError(f"the Docker engine does not answer: {exc}") from None
    return client


def context_tar(dockerfile: str, context: Path, ship: tuple[str, ...], out: IO[bytes]) -> None:
    """The build context the engine receives, as a tar written to OUT: the Dockerfile and the
    paths of CONTEXT it copies (SHIP: the wheelhouse), never the rest of the directory (a spec
    in $HOME would send ~/.ssh to the engine)."""
    with tarfile.open(fileobj=out, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
        for rel in ship:
            tar.add(context / rel, arcname=rel)
    out.seek(0)


def build_image(
    dockerfile: str,
    context: Path,
    tags: list[str],
    build_args: dict[str, str],
    no_cache: bool,
    on_event: Callable[[BuildEvent], None],
    docker_host: str | None = None,
    labels: dict[str, str] | None = None,
    ship: tuple[str, ...] = (),
) -> BuildResult:
    """docker build DOCKERFILE with SHIP (paths under CONTEXT) as its context, tagged TAGS;
    every event goes to ON_EVENT."""
    if not context.is_dir():
        raise UsageError(f"build context {context} is not a directory")
    client = docker_client(docker_host)
    with tempfile.TemporaryFile(prefix="clusterctl-build-") as tar:
        context_tar(dockerfile, context, ship, tar)
        stream = client.api.build(
            fileobj=tar,
            custom_context=True,
            dockerfile="Dockerfile",
            tag=tags[0],
            buildargs=build_args,
            nocache=no_cache,
            rm=True,
            forcerm=True,
            decode=True,
            labels=labels or None,
        )
        image_id, steps, last_step = "", 0, ""
        for event in parse_build_stream(stream):
            on_event(event)
            if event.kind == "error":
                where = f" at step {steps}: {last_step}" if steps else ""
                raise UsageError(f"docker build failed{where}: {event.text}")
            if event.kind == "step":
                steps, last_step = event.step, event.text
            elif event.kind == "id":
                image_id = event.text
    image = client.images.get(tags[0])
    image_id = image_id or image.id
    for extra in tags[1:]:
        repo, _, tag = extra.rpartition(":") if ":" in extra.split("/")[-1] else (extra, "", "")
        image.tag(repo, tag or None)
    return BuildResult(image_id, tuple(tags), steps)
