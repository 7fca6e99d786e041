"""Where a framework's own code runs to judge a spec (issue 46): in the job's own image when a
local container engine has it (the code the job will run), else in a local Python that has
the pinned release (CLUSTERCTL_VERL_PYTHON, CLUSTERCTL_FRAMEWORK_PATH), else nowhere, and
the output says so. What runs there is the payload beside this module: scripts of the
standard library and the framework's own packages, never clusterctl."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

PAYLOAD = Path(__file__).with_name("payload")
IN_IMAGE = "/cc-judge"  # where the payload is mounted, read-only, in the image
# the distribution names whose version is the framework's release
DISTRIBUTIONS = {"verl": "verl", "openrlhf": "openrlhf"}
NAMES = {"verl": "verl", "openrlhf": "OpenRLHF"}


@dataclass(frozen=True)
class Judge:
    """One place a framework's code runs: a Python of this machine, or the python3 of IMAGE
    (no network, this user, read-only but for /tmp, the spec's mounts read-only)."""

    framework: str
    release: str
    python: str = "python3"
    image: str | None = None
    mounts: tuple[tuple[str, str], ...] = ()  # (this machine's path, the container's)
    site: str = ""  # the directory holding the framework's package, where it runs

    def __str__(self) -> str:
        where = f"in image {self.image}" if self.image else f"in {self.python}"
        return f"{NAMES[self.framework]} {self.release} ({where})"

    def command(
        self, script: str, args: tuple[str, ...], env: dict[str, str], name: str
    ) -> list[str]:
        if self.image is None:
            return [self.python, str(PAYLOAD / script), *args]
        return [
            *_container(self.image, name, env, ((str(PAYLOAD), IN_IMAGE), *self.mounts)),
            "--entrypoint", self.python, self.image, f"{IN_IMAGE}/{script}", *args,
        ]  # fmt: skip

    def run(
        self,
        script: str,
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        stdin: str | None = None,
        timeout: float = 300,
    ) -> dict[str, Any]:
        """Run one payload script; its last stdout line is its JSON verdict."""
        name = f"cc-judge-{uuid.uuid4().hex[:12]}"
        try:
            proc = subprocess.run(
                self.command(script, args, env or {}, name),
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                env={**os.environ, **(env or {})} if self.image is None else None,
            )
            return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
            return {"status": "cannot-run", "message": f"the check itself failed: {exc}"}
        finally:
            if self.image is not None:  # gone already unless the deadline cut it short
                subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def _container(
    image: str, name: str, env: dict[str, str], mounts: tuple[tuple[str, str], ...]
) -> list[str]:
    argv = [
        "docker", "run", "--rm", "-i", "--name", name, "--network", "none",
        "--user", f"{os.getuid()}:{os.getgid()}", "--read-only", "--tmpfs", "/tmp",
        "--env", "HOME=/tmp", "--pull", "never",
    ]  # fmt: skip
    for key, value in env.items():
        argv += ["--env", f"{key}={value}"]
    for source, target in mounts:
        argv += ["--mount", f"type=bind,source={source},target={target},readonly"]
    return argv


def image_judge(
    framework: str, image: str, mounts: tuple[tuple[str, str], ...] = ()
) -> Judge | None:
    """The judge in IMAGE, when a local container engine has the image and the framework
    is installed in it (its release and site read there, without importing it)."""
    found = _in_image(framework, image)
    if found is None:
        return None
    here = tuple((s, t) for s, t in mounts if os.path.exists(s))
    return Judge(framework, found[0], image=image, mounts=here, site=found[1])


_PROBE = """import importlib.metadata as m, importlib.util as u, os
print(m.version(%r)); print(os.path.dirname(u.find_spec(%r).submodule_search_locations[0]))"""


@cache
def _in_image(framework: str, image: str) -> tuple[str, str] | None:
    """(release, the directory holding its package) in IMAGE, or None: no engine here, the
    image not in it, or the framework not in the image."""
    if shutil.which("docker") is None:
        return None
    name = f"cc-judge-{uuid.uuid4().hex[:12]}"
    code = _PROBE % (DISTRIBUTIONS[framework], framework)
    try:
        present = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Id}}", image],
            capture_output=True, timeout=30, check=False,
        )  # fmt: skip
        if present.returncode != 0:
            return None
        proc = subprocess.run(
            [*_container(image, name, {}, ()), "--entrypoint", "python3", image, "-c", code],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    lines = proc.stdout.split()
    return (lines[0], lines[1]) if proc.returncode == 0 and len(lines) == 2 else None
