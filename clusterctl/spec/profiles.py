"""Cluster profiles: a site's settings (login host, partition, account, image registry, shared
paths) kept apart from job specs. A spec names one with ``profile: NAME``; the profile's
``spec`` values fill what the job spec leaves unset (the job spec always wins).

The profiles file, first found of: $CLUSTERCTL_PROFILES, ``clusterctl-profiles.yaml`` beside
the spec, ``~/.config/clusterctl/profiles.yaml``::

    profiles:
      mi300x-prod:
        login_host: prod-login        # an alias of ~/.ssh/config: submit --host's default
        ssh: openssh                  # the system's ssh (default paramiko), see docs/commands.md
        remote_dir: clusterctl-jobs   # on the login host, relative to the login's home
        registry: registry.site:5000  # prefixed to container.image when it names no registry
        spec:                         # any spec values, e.g.
          slurm: {partition: mi300x, account: rl-team}
          logs: {dir: /shared/rl/clusterctl-logs}
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationError

from clusterctl.errors import Problem, SpecError
from clusterctl.spec.messages import in_our_words
from clusterctl.spec.models import ImageRef, ProfileName, Section
from clusterctl.spec.yamlfile import (
    PathKey,
    format_path,
    line_for,
    parse_yaml,
    read_small_text,
)

PROFILES_ENV = "CLUSTERCTL_PROFILES"
PROFILES_FILE = "clusterctl-profiles.yaml"

SshAlias = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.@-]*$")]
RemoteDir = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_./~-][A-Za-z0-9_./-]*$")]


class Profile(Section):
    """One site's settings."""

    login_host: SshAlias | None = Field(
        None, description="SSH alias of the login node (submit --host and the job commands)"
    )
    remote_dir: RemoteDir = Field(
        "clusterctl-jobs", description="directory on the login host that holds submitted jobs"
    )
    remote_clusterctl: RemoteDir = Field(
        "clusterctl", description="the clusterctl command on the login host"
    )
    ssh: Literal["paramiko", "openssh"] = Field(
        "paramiko",
        description="how to reach login_host: paramiko (in-process), or openssh (the system's "
        "ssh with your config and agent, reusing a ControlMaster: for 2FA or Kerberos logins)",
    )
    registry: ImageRef | None = Field(
        None, description="registry prefixed to container.image when the image names none"
    )
    spec: dict[str, Any] = Field(
        default_factory=dict, description="spec values the site provides; the job spec wins"
    )


class ProfilesFile(Section):
    profiles: dict[ProfileName, Profile] = Field(default_factory=dict)


@dataclass
class LoadedProfile:
    name: str
    profile: Profile
    source: str
    lines: dict[PathKey, int] = field(default_factory=dict)  # spec paths -> profile lines


def profiles_path(spec_source: str) -> Path:
    """Where the profiles are read from (the first candidate that exists, else the last)."""
    env = os.environ.get(PROFILES_ENV)
    if env:
        return Path(env)
    beside = Path(spec_source).parent / PROFILES_FILE
    if beside.is_file():
        return beside
    return Path.home() / ".config" / "clusterctl" / "profiles.yaml"


def load_profile(name: str, spec_source: str, line: int | None) -> LoadedProfile:
    """The profile NAME; a missing file or profile is a problem at the spec's profile line."""

    path = profiles_path(spec_source)
    if (unsafe := _unsafe_to_trust(path)) is not None:
        raise SpecError([Problem("profile", unsafe, spec_source, line)])
    try:
        text = read_small_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        message = f"cannot read the profiles file {path}: {reason}"
        raise SpecError([Problem("profile", message, spec_source, line)]) from None
    data, lines = parse_yaml(text, str(path))
    try:
        profiles = ProfilesFile.model_validate(data)
    except ValidationError as exc:
        raise SpecError(
            [
                Problem(
                    format_path(loc := tuple(err["loc"])),
                    in_our_words(err),
                    str(path),
                    line_for(lines, loc),
                )
                for err in exc.errors(include_url=False)
            ]
        ) from None
    if name not in profiles.profiles:
        known = ", ".join(sorted(profiles.profiles)) or "none"
        message = f"no profile {name!r} in {path} (it has: {known})"
        raise SpecError([Problem("profile", message, spec_source, line)])
    prefix = ("profiles", name, "spec")
    spec_lines = {k[len(prefix) :]: v for k, v in lines.items() if k[: len(prefix)] == prefix}
    return LoadedProfile(name, profiles.profiles[name], str(path), spec_lines)


def _unsafe_to_trust(path: Path) -> str | None:
    """Why PATH must not be read: a profile sets the login host, the remote clusterctl, the
    registry, mounts and the log directory, so a file another user can change (writable by
    group or others, or theirs, beside a spec in a shared directory) would steer this user's
    jobs. The file $CLUSTERCTL_PROFILES names is the user's own choice of owner."""
    try:
        info = path.stat()
    except OSError:
        return None  # a missing file is reported where it is read
    if info.st_mode & 0o022:
        return f"the profiles file {path} is writable by other users: chmod go-w it"
    chosen = os.environ.get(PROFILES_ENV)
    if not chosen and info.st_uid not in (os.getuid(), 0):
        return (
            f"the profiles file {path} belongs to another user: use your own "
            "(or name it in $CLUSTERCTL_PROFILES)"
        )
    return None


def apply_profile(data: dict[str, Any], loaded: LoadedProfile) -> None:
    """Fill DATA in place with the profile's values where the job spec has none."""
    _fill(data, loaded.profile.spec)
    registry = loaded.profile.registry
    container = data.get("container")
    image = container.get("image") if isinstance(container, dict) else None
    if registry and isinstance(image, str) and not names_registry(image):
        assert isinstance(container, dict)
        container["image"] = f"{registry.rstrip('/')}/{image}"


def names_registry(image: str) -> bool:
    """Does the reference start with a registry host, as docker reads it (a first component
    with '.' or ':', or localhost)?"""
    first, slash, _ = image.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def _fill(into: dict[str, Any], defaults: dict[str, Any]) -> None:
    for key, value in defaults.items():
        if key not in into:
            into[key] = copy.deepcopy(value)
        elif isinstance(into[key], dict) and isinstance(value, dict):
            _fill(into[key], value)
