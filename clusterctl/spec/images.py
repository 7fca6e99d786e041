"""Versions an image reference states in its tag, for the image families that encode them.

Tag grammars, as the publishers name their images (checked 2026-11):
- AMD's verl images, ``rocm/verl:verl-0.6.0.amd0_rocm7.0_vllm0.11.0.dev`` (AMD ROCm docs
  26.02-26.09, verl docs/amd_tutorial): verl, ROCm and vLLM;
- AMD's vLLM images, ``rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9_vllm_0.6.4`` (AMD ROCm docs,
  the seeds' guide): ROCm, Python and vLLM;
- verl's own images, ``verlai/verl:vllm0.11.0`` / ``...:app-verl0.6-...-vllm0.11.0-...``: the
  parts that carry a number after a known name.
Other references (``latest``, a digest, an own tag) state nothing, and nothing is assumed.
"""

from __future__ import annotations

import re

# name in the tag -> the versions: field it states
_FIELDS = {"verl": "verl", "rocm": "rocm", "vllm": "vllm", "py": "python", "cuda": "cuda"}
_PART = re.compile(r"(?<![A-Za-z])(verl|rocm|vllm|py|cuda)[-_]?(\d+(?:\.\d+)*)")
_FAMILIES = ("rocm/verl", "rocm/vllm", "verlai/verl")


def image_versions(image: str) -> dict[str, str]:
    """versions: fields the image's tag states, e.g. {"verl": "0.6.0", "rocm": "7.0"}."""
    name, _, tag = image.split("@", 1)[0].rpartition(":")
    if "/" in tag or not name:
        return {}  # a registry port, not a tag
    repository = name.split("/", 1)[1] if name.count("/") >= 2 else name
    if repository not in _FAMILIES:
        return {}
    found: dict[str, str] = {}
    for key, version in _PART.findall(tag):
        found.setdefault(_FIELDS[key], version)
    return found


def same_release(declared: str, stated: str) -> bool:
    """True when a declared version agrees with what a tag states, to the tag's precision:
    a tag's "7.0" agrees with "7.0.2", "0.11.0" (of "0.11.0.dev") with "0.11.0"."""
    have = declared.split(".")
    want = stated.split(".")
    return have[: len(want)] == want or want[: len(have)] == have
