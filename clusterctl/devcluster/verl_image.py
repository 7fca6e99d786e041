"""verl's own trainer on the dev cluster: the dev verl image and the assets it trains on.

The image is the dev image plus verl 0.5.0's resolved set (verl_cpu/requirements.lock),
installed offline from wheels built on the host, and the CPU patch module (off unless the job
sets DEV_VERL_CPU_PATCHES=1). It is built once per content: its recipe label hashes the
files of verl_cpu/ and the dev image's recipe. The assets (a tokenizer, a tiny random Qwen2, a
parquet data set, a reward function) are made inside that image, with no model hub.
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from pathlib import Path

from clusterctl.devcluster import cluster
from clusterctl.errors import UsageError

VERL_VERSION = "0.5.0"
VERL_IMAGE = cluster.DEV_VERL_IMAGE
RECIPE_DIR = Path(__file__).with_name("verl_cpu")
LOCK = RECIPE_DIR / "requirements.lock"
CONTEXT_FILES = ("requirements.lock", "clusterctl_verl_cpu.py", "clusterctl_verl_cpu.pth",
                 "make_assets.py")  # fmt: skip
# The dev image already holds these at these versions; their wheels stay out of the context.
IN_BASE = {"torch": f"{cluster.TORCH_VERSION}+cpu", "ray": cluster.RAY_VERSION}
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)$")


def recipe() -> str:
    digest = hashlib.sha256(cluster.dev_recipe().encode())
    for name in ("Dockerfile", *CONTEXT_FILES):
        digest.update((RECIPE_DIR / name).read_bytes())
    return digest.hexdigest()[:16]


def image_current() -> bool:
    return cluster.image_recipe(VERL_IMAGE) == recipe()


def lock_pins() -> dict[str, str]:
    """name -> version of every line of the lock (comments and blanks skipped)."""
    pins = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            found = PIN.match(line.strip())
            if not found:
                raise UsageError(f"{LOCK}: not a name==version line: {line!r}")
            pins[found.group(1).lower()] = found.group(2)
    return pins


def wheels(say: cluster.Say) -> list[Path]:
    """The lock's wheels but the base image's, built or fetched on the host once per lock."""
    pins = lock_pins()
    for name, version in IN_BASE.items():
        if pins.get(name) != version:
            raise UsageError(
                f"{LOCK} pins {name}=={pins.get(name)}, the dev image has {version}: "
                "resolve the lock again on the dev image's versions"
            )
    lock_hash = hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16]
    house = cluster.CACHE_DIR / "verl-wheels"
    stamp = house / f".complete-{lock_hash}"
    if not stamp.exists():
        if sys.version_info[:2] != (3, 11):
            raise UsageError(
                "the dev verl image's wheels are built with this Python, which must be 3.11 "
                f"as in the image (this is {sys.version_info.major}.{sys.version_info.minor})"
            )
        house.mkdir(parents=True, exist_ok=True)
        wanted = [f"{n}=={v}" for n, v in pins.items() if n not in IN_BASE]
        say(f"fetching or building {len(wanted)} wheels of verl {VERL_VERSION}'s set")
        # pip wheel, not pip download: a few of the set are sdists only (antlr4, pylatexenc)
        _run_or_say_why(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(house), *wanted],
            "pip wheel of the verl set",
        )
        stamp.touch()
    return sorted(house.glob("*.whl"))


def build(say: cluster.Say, force: bool = False) -> None:
    """Build VERL_IMAGE unless an image of today's recipe exists."""
    cluster.build_image(say)  # the base: the dev image, current
    if image_current() and not force:
        return
    wheel_files = wheels(say)
    say(f"building {VERL_IMAGE} offline ({len(wheel_files)} wheels)")
    started = time.monotonic()
    cluster.build_offline(
        (RECIPE_DIR / "Dockerfile").read_text(),
        wheel_files,
        say,
        tag=VERL_IMAGE,
        recipe=recipe(),
        files=[RECIPE_DIR / name for name in CONTEXT_FILES],
    )
    say(f"built {VERL_IMAGE} in {time.monotonic() - started:.0f}s")


def make_assets(out: Path, say: cluster.Say) -> None:
    """Tokenizer, model, data and reward function under OUT, made in the dev verl image."""
    if not out.is_absolute():
        raise UsageError(f"{out}: give an absolute path (it is mounted into a container)")
    build(say)
    out.mkdir(parents=True, exist_ok=True)
    done = _run_or_say_why(
        ["docker", "run", "--rm", "--network", "none", "-v", f"{out}:/assets", VERL_IMAGE,
         "python3", "/opt/clusterctl/make_assets.py", "/assets"],
        "making the assets",
    )  # fmt: skip
    say(done.strip())


def _run_or_say_why(cmd: list[str], what: str) -> str:
    done = cluster.run(cmd, check=False, timeout=1800)
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        raise UsageError(f"{what} failed (exit {done.returncode}): {' | '.join(tail)}")
    return done.stdout
