"""Judges for `clusterctl verify` and the job's preflight: pure functions from what the nodes
printed to results.

The gather script (templates/partials/gather.sh.j2) prints each tool's own output in
sections; nothing here runs a command, so every judge is tested on captured output. Each
result names the node, the check, a reason and a fix. Cross-node judges compare what must be
identical on every node (driver, ROCm/CUDA, image digest, GID kind, clock).

The job ships this file and runs it on the batch host (`python3 - DIR EXPECT STARTED ENDED`),
so it uses the standard library only and runs on Python >= 3.8.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
# A check whose tool answered in a way that cannot be read: never ok, never a drain.
UNKNOWN = "unknown"
GIB = 1 << 30

# Thresholds, each from a public preflight tool:
# AMD CVS / Primus preflight defaults: shm_min_gb 8, ulimit_l_min_gb 32
# (ROCm/cvs: cvs/input/config_file/preflight/README_preflight_config.md, read 2026-11).
SHM_MIN_BYTES = 8 * GIB
MEMLOCK_MIN_KIB = 32 * GIB // 1024
# Free space where the job's logs go: Ray's session logs of a multi-day run reach gigabytes.
DISK_FAIL_BYTES = 1 * GIB
DISK_WARN_BYTES = 10 * GIB
# Clock offset between nodes: timelines and Ray's event ordering go wrong well before this.
CLOCK_WARN_SECONDS = 1.0
# InfiniBand sysfs `state` of a usable port (linux drivers/infiniband/core/sysfs.c).
IB_ACTIVE = "4: ACTIVE"


@dataclass(frozen=True)
class Result:
    node: str  # a node name, or "*" for a judge across nodes
    check: str
    status: str  # ok, warn, fail, unknown, skip
    reason: str
    fix: str = ""
    # a positive finding about the node's own health (a GPU missing, ECC errors, a port
    # down): only these may drain it; never a tool that could not be read, never a finding
    # about this job (a port in use, an image, leftovers)
    drain: bool = False


@dataclass(frozen=True)
class Section:
    rc: int
    text: str  # the tool's stdout
    stderr: str = ""  # kept apart: warnings there must not break what stdout holds


@dataclass
class NodeFacts:
    """One node's gather output, split into sections."""

    node: str
    clock: float
    sections: dict[str, Section] = field(default_factory=dict)
    # local time when the request left and the answer came back (clock offset)
    sent: float | None = None
    received: float | None = None

    def section(self, name: str) -> Section | None:
        return self.sections.get(name)

    def offset(self) -> float | None:
        """The node's clock minus ours, NTP-style from the round trip's midpoint."""
        if self.sent is None or self.received is None:
            return None
        return self.clock - (self.sent + self.received) / 2


@dataclass(frozen=True)
class Expect:
    """What the job needs from every node."""

    vendor: str  # amd, nvidia or none
    gpus_per_node: int
    image: str
    fabric: str | None = None  # ib, roce, ethernet
    hcas: tuple[str, ...] = ()
    gid_index: int | None = None
    # SLURM jobs still running (their containers stay); None: unknown (no squeue here)
    live_jobs: frozenset[str] | None = frozenset()
    # the image ID every node must hold under the tag (container.image_id, or the ID file
    # beside a load_from tarball); None: only the same image on every node
    image_id: str | None = None
    # before the job: its preflight loads the tarball over another image (a warning, not a
    # failure); in the preflight, after that load, another image is a failure
    image_reloads: bool = False
    # the containers run with --ulimit memlock=-1 (the GPU presets): the host's ulimit -l
    # is then not what RDMA in the job gets
    container_memlock_unlimited: bool = False
    # hardware.logical_gpus: GPUs declared to Ray without devices (a dev cluster)
    logical_gpus: bool = False
    # verify without a spec: the expectations were read from the nodes (verify/bare.py), so
    # no image is judged and counts are compared with the other nodes, not with a job
    bare: bool = False
    # the device nodes to judge (None: every one the gather lists)
    devices: tuple[str, ...] | None = None


def parse_gather(text: str) -> list[NodeFacts]:
    """Split gather output (one node's, or many nodes' concatenated) into NodeFacts."""
    nodes: list[NodeFacts] = []
    current: NodeFacts | None = None
    name = ""
    lines: list[str] = []
    errors: list[str] | None = None  # after "@@cc-stderr NAME": that section's stderr
    rc = 0

    def close() -> None:
        if current is not None and name:
            stderr = "\n".join(errors).strip("\n") if errors is not None else ""
            if errors is not None and name in current.sections:
                kept = current.sections[name]
                current.sections[name] = Section(kept.rc, kept.text, stderr)
            else:
                current.sections[name] = Section(rc, "\n".join(lines).strip("\n"))

    for line in text.splitlines():
        if line.startswith("@@cc-gather "):
            close()
            name, lines, errors = "", [], None
            parts = line.split()
            current = NodeFacts(node=parts[1] if len(parts) > 1 else "?", clock=_number(parts, 2))
            nodes.append(current)
        elif line.startswith("@@cc-section ") and current is not None:
            close()
            parts = [*line.split(), "", ""]
            name, lines, errors = parts[1], [], None
            found = re.fullmatch(r"rc=(\d+)", parts[2])
            rc = int(found.group(1)) if found else 0 if not parts[2] else -1
        elif line.startswith("@@cc-stderr ") and current is not None:
            close()
            name, errors = line.split()[1], []
        elif current is not None and name:
            (errors if errors is not None else lines).append(line)
    close()
    return nodes


def _number(parts: list[str], index: int) -> float:
    try:
        return float(parts[index])
    except (IndexError, ValueError):
        return 0.0


def json_payload(text: str) -> object:
    """The JSON document in a tool's stdout, whatever comes around it: amd-smi prints
    "WARNING: User is missing the following required groups" (25.x, amdsmi#130) or Python
    SyntaxWarning lines before it, and some releases a note after it. None when there is none."""
    decoder = json.JSONDecoder()
    # a top-level document starts a line (the tools print it indented inside); an indented
    # brace is a nested object of a truncated document, never the answer
    for match in re.finditer(r"^[\[{]", text, re.MULTILINE):
        try:
            value, _end = decoder.raw_decode(text, match.end() - 1)
        except ValueError:
            continue
        if isinstance(value, (list, dict)):
            return value
    return None


def _json(section: Section | None) -> object:
    if section is None or section.rc != 0:
        return None
    return json_payload(section.text)


def tool_words(section: Section | None, limit: int = 3) -> str:
    """The first lines a tool printed (stdout, then stderr): its own words for a verdict."""
    if section is None:
        return "no output"
    lines = [
        line.strip() for line in (section.text + "\n" + section.stderr).splitlines() if line.strip()
    ]
    head = " | ".join(lines[:limit])
    return (head[:300] + "...") if len(head) > 300 else head or f"no output (exit {section.rc})"


def _gpu_items(data: object) -> list[dict[str, Any]]:
    """amd-smi's per-GPU list; releases from ROCm 6.4 wrap it as {"gpu_data": [...]}."""
    if isinstance(data, dict):
        data = data.get("gpu_data", [])
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def _value(v: object) -> float | None:
    """A number amd-smi prints bare or as {"value": N, "unit": U}; None for "N/A"."""
    if isinstance(v, dict):
        v = v.get("value")
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v))
    except ValueError:
        return None


@dataclass(frozen=True)
class GpuInventory:
    tool: str
    count: int
    models: tuple[str, ...] = ()
    driver: str = ""
    runtime: str = ""  # ROCm or CUDA version
    foreign: tuple[str, ...] = ()  # "GPU i: pid P (name), N MiB"
    ecc_errors: tuple[str, ...] = ()  # "GPU i: N uncorrectable"
    # checks whose section could not be read: check -> the tool's own words
    unread: tuple[tuple[str, str], ...] = ()
    mig: tuple[str, ...] = ()  # indexes of GPUs in MIG mode (nvidia-smi mig.mode.current)
    # AMD compute partitions: the processors amd-smi lists when more than the physical GPUs
    partitions: int = 0
    # the partition modes amd-smi names ("CPX", "NPS1"; `static --partition`)
    compute_modes: tuple[str, ...] = ()
    memory_modes: tuple[str, ...] = ()
    # what a GPU is, by what does not change with a marketing name: PCI device id (and gfx
    # target); market_name reads "MI300X-O", "AMD Instinct MI300X VF" or "N/A" for one part
    identity: tuple[str, ...] = ()
    memory_used: tuple[tuple[str, float], ...] = ()  # (GPU, MiB in use): seen by any user


# Memory in use on a GPU no listed process explains: above these floors something holds it.
# An idle GPU reads far below them: H100 0 MiB (real/nvidia-smi-590.48.01-h100-...-csv-idle),
# 0-1 MiB in public idle H100 tables, 14 MiB on an idle H800; MI300X 283 and 492 MiB
# (real/amd-smi-26.0.0-...-default-view-...). A process's CUDA or HIP context alone holds
# hundreds of MiB more, so a hidden process is above them.
IDLE_FLOOR_MIB = {"nvidia-smi": 256.0, "amd-smi": 1024.0}


@dataclass(frozen=True)
class Unreadable:
    """A GPU tool that is there but whose answer cannot be read."""

    tool: str
    words: str
    fix: str


# amd-smi refuses non-root users outside the video and render groups: 25.x prints a WARNING
# before the data (amdsmi#130), ROCm 7.0 raises "RuntimeError: WARNING: User is missing ..."
# with no data (amdsmi#184), 7.1 prints "Permission needed to access required GPU device
# node(s)" (amdsmi#184); with amdgpu built into the kernel it reports the driver as not
# initialised (amdsmi#172). Captures: tests/fixtures/verify/real/README.md.
_AMD_SMI_CAUSES = (
    (
        re.compile(r"missing the following required groups|Permission needed", re.I),
        "add the user that runs the job (and verify) to both the video and render groups, or "
        "run verify as root (amd-smi checks both groups before it reads a GPU)",
    ),
    (
        re.compile(r"not initiali[sz]ed|initstate", re.I),
        "amd-smi cannot read the amdgpu module's state (amdgpu built into the kernel, "
        "amdsmi#172): the kfd topology in sysfs counts the GPUs instead",
    ),
)


def _amd_smi_fix(words: str) -> str:
    for pattern, fix in _AMD_SMI_CAUSES:
        if pattern.search(words):
            return fix
    return "run `amd-smi list --json` on the node as the job's user to see why it fails"


def _amd_unreadable(tool: str, section: Section) -> Unreadable:
    words = tool_words(section)
    return Unreadable(tool, words, _amd_smi_fix(words))


def _unread(section: Section | None) -> str | None:
    """None when the section is there and holds JSON; else the tool's words."""
    if section is None or section.rc == 127:
        return None  # not gathered, or the tool is absent: nothing to read
    if section.rc == 0 and json_payload(section.text) is not None:
        return None
    return tool_words(section)


def kfd_gpu_count(facts: NodeFacts) -> int | None:
    """GPUs in the kfd topology (sysfs, readable by any user): nodes whose gpu_id is not 0.
    None when the section is absent (not an AMD node, or an older gather)."""
    section = facts.section("kfd-gpus")
    if section is None or section.rc != 0:
        return None
    return sum(1 for line in _lines(section) if line.strip().isdigit() and int(line) != 0)


def amd_inventory(facts: NodeFacts) -> GpuInventory | Unreadable | None:
    """GPUs as amd-smi (or rocm-smi) reports them; None when neither tool is there."""
    listing = facts.section("amd-smi-list")
    if listing is None or listing.rc == 127:
        return _rocm_smi_inventory(facts)
    listed = _gpu_items(_json(listing))
    if not listed:
        return _amd_unreadable("amd-smi", listing)
    static = _gpu_items(_json(facts.section("amd-smi-static")))
    asics = [g["asic"] for g in static if isinstance(g.get("asic"), dict)]
    models = tuple(str(a.get("market_name", "?")) for a in asics)
    identity = tuple(
        " ".join(
            str(a.get(k)) for k in ("device_id", "target_graphics_version") if _known(a.get(k))
        )
        for a in asics
        if _known(a.get("device_id"))
    )
    modes = [g["partition"] for g in _gpu_items(_json(facts.section("amd-smi-partition")))
             if isinstance(g.get("partition"), dict)]  # fmt: skip
    drivers = {str((g.get("driver") or {}).get("version", "")) for g in static if "driver" in g}
    version = _json(facts.section("amd-smi-version"))
    version_item = _gpu_items(version)[:1] or ([version] if isinstance(version, dict) else [])
    rocm = _text(facts.section("rocm-version")) or str(
        (version_item[0] if version_item else {}).get("rocm_version", "")
    )
    foreign = []
    for gpu in _gpu_items(_json(facts.section("amd-smi-process"))):
        for proc in gpu.get("process_list") or []:
            info = proc.get("process_info", proc) if isinstance(proc, dict) else proc
            if not isinstance(info, dict):
                continue  # "No running processes detected"
            vram = _value((info.get("memory_usage") or {}).get("vram_mem"))
            mib = f", {vram / (1 << 20):.0f} MiB VRAM" if vram is not None else ""
            foreign.append(f"GPU {gpu.get('gpu')}: pid {info.get('pid')} ({info.get('name')}){mib}")
    ecc = []
    for gpu in _gpu_items(_json(facts.section("amd-smi-ecc"))):
        count = _value((gpu.get("ecc") or {}).get("total_uncorrectable_count"))
        if count:
            ecc.append(f"GPU {gpu.get('gpu')}: {count:.0f} uncorrectable ECC errors")
    unread = tuple(
        (check, said)
        for check, name in (("gpu-processes", "amd-smi-process"), ("gpu-ecc", "amd-smi-ecc"))
        if (said := _unread(facts.section(name))) is not None
    )
    # In a compute partition mode (DPX, QPX, CPX) amd-smi lists each partition as a GPU, with
    # its physical GPU's UUID (ROCm/amdsmi#132; the ROCm blog's CPX capture: 64 listed, 8 alike)
    physical = len({_physical_id(g) for g in listed})
    return GpuInventory(
        "amd-smi",
        physical,
        models,
        ",".join(sorted(d for d in drivers if d)),
        rocm,
        tuple(foreign),
        tuple(ecc),
        unread,
        partitions=len(listed) if len(listed) > physical else 0,
        compute_modes=_modes(modes, "compute_partition"),
        memory_modes=_modes(modes, "memory_partition"),
        identity=identity,
        memory_used=tuple(
            (str(g.get("gpu")), used)
            for g in _gpu_items(_json(facts.section("amd-smi-memory")))
            if (used := _value((g.get("mem_usage") or {}).get("used_vram"))) is not None
        ),
    )


def _known(value: object) -> bool:
    return value not in (None, "", "N/A")


def _modes(partitions: list[dict[str, Any]], key: str) -> tuple[str, ...]:
    return tuple(sorted({str(p[key]) for p in partitions if _known(p.get(key))}))


def _physical_id(gpu: dict[str, Any]) -> str:
    """A listed processor's physical GPU: its UUID, else its BDF without the function."""
    uuid = str(gpu.get("uuid") or "")
    if uuid and uuid != "N/A":
        return uuid
    return str(gpu.get("bdf") or gpu.get("gpu")).rsplit(".", 1)[0]


def _rocm_smi_inventory(facts: NodeFacts) -> GpuInventory | Unreadable | None:
    section = facts.section("rocm-smi")
    if section is None or section.rc == 127:
        return None
    data = _json(section)
    if not isinstance(data, dict):
        return _amd_unreadable("rocm-smi", section)
    cards = {k: v for k, v in data.items() if k.startswith("card") and isinstance(v, dict)}
    # the key is "Card series" in rocm-smi 6.x (telegraf's captures), "Card Series" in others
    models = tuple(str(v.get("Card Series", v.get("Card series", "?"))) for v in cards.values())
    driver = str((data.get("system") or {}).get("Driver version", ""))
    return GpuInventory(
        "rocm-smi", len(cards), models, driver, _text(facts.section("rocm-version"))
    )


def csv_rows(text: str) -> list[dict[str, str]]:
    """nvidia-smi --format=csv: a header, then a row per GPU (or process); cells by column
    name without the unit the header adds ("memory.used [MiB]" -> "memory.used") and the
    value without its unit ("19818 MiB" -> "19818"); "[N/A]" stays as nvidia-smi prints it."""
    import csv

    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    reader = csv.reader(lines, skipinitialspace=True)
    header = [re.sub(r"\s*\[.*\]$", "", cell.strip()) for cell in next(reader)]
    rows = []
    for cells in reader:
        if len(cells) != len(header):
            continue
        values = [cell.strip() for cell in cells]
        values = [v if v.startswith("[") else re.sub(r"\s+(MiB|%|W|MHz)$", "", v) for v in values]
        rows.append(dict(zip(header, values)))  # noqa: B905 (runs on Python 3.8; lengths checked)
    return rows


def nvidia_inventory(facts: NodeFacts) -> GpuInventory | Unreadable | None:
    """GPUs as nvidia-smi's query interface reports them (CSV, columns by name); None when
    nvidia-smi is absent."""
    gpus = facts.section("nvidia-gpus")
    if gpus is None or gpus.rc == 127:
        return None
    rows = [r for r in csv_rows(gpus.text) if r.get("index", "").isdigit() and r.get("uuid")]
    if gpus.rc != 0 or not rows:
        return Unreadable(
            "nvidia-smi",
            tool_words(gpus),
            "run `nvidia-smi` on the node as the job's user: the driver may not be loaded",
        )
    names = {r["uuid"]: r["index"] for r in rows}
    ecc = tuple(
        f"GPU {r['index']}: {r[ECC]} uncorrectable ECC errors"
        for r in rows
        if r.get(ECC, "").isdigit() and int(r[ECC])
    )
    foreign = []
    apps = facts.section("nvidia-apps")
    for app in csv_rows(apps.text if apps and apps.rc == 0 else ""):
        gpu = names.get(app.get("gpu_uuid", ""), app.get("gpu_uuid", "?"))
        memory = app.get("used_gpu_memory", app.get("used_memory", "?"))
        foreign.append(f"GPU {gpu}: pid {app.get('pid')} ({app.get('process_name')}), {memory} MiB")
    apps_failed = apps is not None and apps.rc not in (0, 127)
    unread = (("gpu-processes", tool_words(apps)),) if apps_failed else ()
    header = facts.section("nvidia-smi")
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", header.text if header else "")
    return GpuInventory(
        "nvidia-smi",
        len(rows),
        tuple(r.get("name", "?") for r in rows),
        ",".join(sorted({r.get("driver_version", "") for r in rows})),
        cuda.group(1) if cuda else "",
        tuple(foreign),
        ecc,
        unread,
        tuple(r["index"] for r in rows if r.get("mig.mode.current") == "Enabled"),
        identity=tuple(r["pci.device_id"] for r in rows if _known(r.get("pci.device_id"))),
        memory_used=tuple(
            (r["index"], float(r["memory.used"]))
            for r in rows
            if re.fullmatch(r"\d+(\.\d+)?", r.get("memory.used", ""))
        ),
    )


ECC = "ecc.errors.uncorrected.volatile.total"


def _text(section: Section | None) -> str:
    return section.text.strip() if section is not None and section.rc == 0 else ""


def judge_gpus(facts: NodeFacts, expect: Expect) -> list[Result]:
    n = facts.node
    if expect.vendor not in ("amd", "nvidia") or expect.gpus_per_node == 0:
        why = "no node's GPU tool sees a GPU" if expect.bare else "the spec asks for no GPUs"
        return [Result(n, "gpus", SKIP, why)]
    if expect.logical_gpus:
        why = f"hardware.logical_gpus: {expect.gpus_per_node} GPUs declared to Ray, no device"
        return [Result(n, "gpus", SKIP, why)]
    inv = amd_inventory(facts) if expect.vendor == "amd" else nvidia_inventory(facts)
    tool = "amd-smi or rocm-smi" if expect.vendor == "amd" else "nvidia-smi"
    if inv is None:
        return [
            Result(
                n,
                "gpus",
                FAIL,
                f"{tool} is missing: GPUs cannot be counted",
                f"install the driver tools on {n}",
            )
        ]
    if isinstance(inv, Unreadable):
        return _judge_unreadable(facts, expect, inv)
    out = []
    if inv.count < expect.gpus_per_node:
        out.append(
            Result(
                n,
                "gpus",
                FAIL,
                f"{inv.tool} sees {inv.count} GPUs, "
                f"{'another node has' if expect.bare else 'the job needs'} {expect.gpus_per_node}",
                f"a GPU has fallen off the bus or its driver failed: drain {n}",
                drain=True,
            )
        )
    else:
        models = ", ".join(sorted(set(inv.models))) or "model unknown"
        out.append(Result(n, "gpus", OK, f"{inv.count} GPUs ({models})"))
    if inv.mig:
        # a MIG-enabled GPU runs no CUDA work as a whole GPU: the job's ranks (one per GPU)
        # and NCCL need whole GPUs; the operator chose the mode, so it is not drained for it
        out.append(
            Result(
                n,
                "gpu-mode",
                FAIL,
                f"MIG is enabled on GPU {', '.join(inv.mig)} ({len(inv.mig)} of {inv.count} "
                "physical GPUs): training needs whole GPUs",
                "disable MIG: `nvidia-smi -i N -mig 0` for each, then reset the GPU "
                "(`nvidia-smi -i N -r`) or reboot; or run on nodes without MIG",
            )
        )
    split = [m for m in inv.compute_modes if m != "SPX"]
    if inv.partitions or split:
        # the operator's partition mode: a job that wants whole GPUs cannot run here, another
        # (one rank per partition) may, so it is not drained for it
        mode = (
            f"compute partition mode {'/'.join(split)}"
            + (f" (memory {'/'.join(inv.memory_modes)})" if inv.memory_modes else "")
            if split
            else "compute partitions (a mode other than SPX; `amd-smi static --partition` names it)"
        )
        listed = (
            f": {inv.count} physical GPUs are listed as {inv.partitions} "
            f"({inv.partitions // max(inv.count, 1)} each)"
            if inv.partitions
            else ""
        )
        out.append(
            Result(
                n,
                "gpu-mode",
                FAIL,
                f"{mode}{listed}: training needs whole GPUs",
                "set SPX: `amd-smi set --gpu all --compute-partition SPX` (and "
                "`--memory-partition NPS1`), then reload amdgpu; or run on nodes in SPX",
            )
        )
    unread = dict(inv.unread)
    if "gpu-processes" in unread:
        out.append(
            Result(
                n,
                "gpu-processes",
                UNKNOWN,
                f"{inv.tool} could not list GPU processes: {unread['gpu-processes']}",
                _amd_smi_fix(unread["gpu-processes"]) if expect.vendor == "amd" else "",
            )
        )
    elif inv.foreign:
        out.append(
            Result(
                n,
                "gpu-processes",
                FAIL,
                "GPUs in use by processes not of this job: " + "; ".join(inv.foreign),
                "stop them (an earlier job's leftovers?) or drain the node",
            )
        )
    else:
        out.append(_judge_unlisted_memory(facts, inv))
    if "gpu-ecc" in unread:
        out.append(
            Result(
                n,
                "gpu-ecc",
                UNKNOWN,
                f"{inv.tool} could not read ECC counters: {unread['gpu-ecc']}",
                _amd_smi_fix(unread["gpu-ecc"]),
            )
        )
    elif inv.ecc_errors:
        out.append(
            Result(
                n,
                "gpu-ecc",
                FAIL,
                "; ".join(inv.ecc_errors),
                f"uncorrectable memory errors: drain {n} and have the GPU checked",
                drain=True,
            )
        )
    return out


def _judge_unlisted_memory(facts: NodeFacts, inv: GpuInventory) -> Result:
    """No process listed: a second signal that needs no root (memory in use per GPU), since
    the tools list only the processes the user may see (amd-smi#130; nvidia-smi outside the
    process's PID namespace)."""
    n, floor = facts.node, IDLE_FLOOR_MIB.get(inv.tool, 0.0)
    held = [f"GPU {gpu}: {mib:.0f} MiB" for gpu, mib in inv.memory_used if mib > floor]
    uid = _text(facts.section("uid"))
    as_whom = f"as uid {uid}, which sees only its own processes" if uid not in ("", "0") else ""
    if held:
        return Result(
            n,
            "gpu-processes",
            FAIL,
            f"GPU memory in use with no process listed ({'; '.join(held)}; idle reads below "
            f"{floor:.0f} MiB){': a process hidden from this user' if as_whom else ''}",
            "find what holds it as root (`amd-smi process` / `nvidia-smi`): another user's job "
            "or an earlier job's leftovers; stop it or drain the node",
        )
    if not inv.memory_used:
        why = f" ({as_whom}; GPU memory use not read)" if as_whom else ""
        return Result(n, "gpu-processes", OK, f"no process holds a GPU{why}")
    seen = f" ({as_whom})" if as_whom else ""
    return Result(
        n,
        "gpu-processes",
        OK,
        f"no process holds a GPU{seen}, and no GPU has memory in use above the idle floor "
        f"({floor:.0f} MiB)",
    )


def _judge_unreadable(facts: NodeFacts, expect: Expect, inv: Unreadable) -> list[Result]:
    """The GPU tool answered but cannot be read: never "0 GPUs", never a drain. On AMD the
    kfd topology (sysfs, any user) still counts the GPUs the driver has."""
    n = facts.node
    kfd = kfd_gpu_count(facts)
    said = f"{inv.tool}'s output cannot be read ({inv.words})"
    processes = Result(
        n, "gpu-processes", UNKNOWN, f"{inv.tool} could not list GPU processes", inv.fix
    )
    if kfd is not None and kfd >= expect.gpus_per_node:
        return [
            Result(n, "gpus", WARN, f"{said}; the kfd topology shows {kfd} GPUs", inv.fix),
            processes,
        ]
    counted = f"; the kfd topology shows {kfd} GPUs" if kfd is not None else ""
    return [Result(n, "gpus", UNKNOWN, said + counted, inv.fix), processes]


def judge_devices(facts: NodeFacts, expect: Expect) -> list[Result]:
    section = facts.section("devices")
    listed = [line.split(" ", 1) for line in _lines(section) if " " in line]
    wanted = expect.devices
    judged = [(state, dev) for state, dev in listed if wanted is None or dev in wanted]
    missing = [dev for state, dev in judged if state == "missing"]
    if missing:
        return [
            Result(
                facts.node,
                "devices",
                FAIL,
                "missing device nodes: " + ", ".join(missing),
                "load the driver (amdgpu / nvidia, ib_uverbs) or fix container.devices",
                drain=True,
            )
        ]
    return [Result(facts.node, "devices", OK, f"{len(judged)} device nodes present")]


def _lines(section: Section | None) -> list[str]:
    return [line for line in (section.text if section else "").splitlines() if line.strip()]


@dataclass(frozen=True)
class IbPort:
    device: str
    port: str
    state: str
    phys_state: str
    rate_gbps: float
    link_layer: str
    gid: str
    gid_type: str

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"


def ib_ports(facts: NodeFacts) -> list[IbPort]:
    out = []
    for line in _lines(facts.section("ib")):
        head, _, rest = line.partition("|")
        parts = rest.split("|")
        if len(parts) < 6 or " " not in head:
            continue
        dev, port = head.split(" ", 1)
        rate = re.match(r"\s*([0-9.]+)\s*Gb/sec", parts[2])
        out.append(
            IbPort(
                dev,
                port,
                parts[0].strip(),
                parts[1].strip(),
                float(rate.group(1)) if rate else 0.0,
                parts[3].strip(),
                parts[4].strip(),
                parts[5].strip(),
            )
        )
    return out


def gid_kind(gid: str) -> str:
    """What a GID holds: NCCL needs the same kind on every node (RoCE v2 + IPv4 usually)."""
    g = gid.lower()
    if not g or set(g) <= {"0", ":"}:
        return "empty"
    if g.startswith("0000:0000:0000:0000:0000:ffff:"):
        return "ipv4-mapped"
    if g.startswith("fe80:"):
        return "link-local"
    return "ipv6"


def judge_fabric(facts: NodeFacts, expect: Expect) -> list[Result]:
    n = facts.node
    if expect.fabric not in ("ib", "roce"):
        why = f"network.fabric is {expect.fabric or 'not set'}"
        return [Result(n, "fabric", SKIP, "no node has an RDMA port" if expect.bare else why)]
    ports = [p for p in ib_ports(facts) if not expect.hcas or p.device in expect.hcas]
    if not ports:
        wanted = ", ".join(expect.hcas) or "any HCA"
        return [
            Result(
                n,
                "fabric",
                FAIL,
                f"no InfiniBand/RoCE port ({wanted}) in sysfs",
                "load the HCA driver, or check network.hcas",
            )
        ]
    out = []
    down = [f"{p.name} {p.state}" for p in ports if p.state != IB_ACTIVE]
    if down:
        out.append(
            Result(
                n,
                "fabric",
                FAIL,
                "ports not ACTIVE: " + ", ".join(down),
                f"check cables and the subnet manager; or drain {n}",
                drain=True,
            )
        )
    else:
        rates = ", ".join(sorted({f"{p.rate_gbps:g} Gb/s" for p in ports}))
        out.append(Result(n, "fabric", OK, f"{len(ports)} ports ACTIVE at {rates}"))
    if expect.gid_index is not None:
        empty = [p.name for p in ports if gid_kind(p.gid) == "empty"]
        if empty:
            out.append(
                Result(
                    n,
                    "gid",
                    FAIL,
                    f"GID index {expect.gid_index} is empty on " + ", ".join(empty),
                    "pick the index that holds the RoCE v2 IPv4 GID (show_gids)",
                )
            )
    return out


def judge_limits(facts: NodeFacts, expect: Expect) -> list[Result]:
    n = facts.node
    out = []
    memlock = _text(facts.section("memlock"))
    if expect.fabric not in ("ib", "roce"):
        out.append(Result(n, "memlock", SKIP, "no RDMA fabric: locked memory is not needed"))
    elif expect.container_memlock_unlimited:
        out.append(
            Result(
                n,
                "memlock",
                OK,
                f"containers run with --ulimit memlock=-1 (this shell's ulimit -l "
                f"{memlock or 'unknown'} does not apply to them)",
            )
        )
    elif memlock == "unlimited":
        out.append(Result(n, "memlock", OK, "ulimit -l unlimited"))
    elif memlock.isdigit() and int(memlock) >= MEMLOCK_MIN_KIB:
        out.append(Result(n, "memlock", OK, f"ulimit -l {memlock} KiB"))
    else:
        out.append(
            Result(
                n,
                "memlock",
                WARN,
                f"ulimit -l is {memlock or 'unknown'} KiB",
                "RDMA registers pinned memory: set memlock unlimited in "
                "/etc/security/limits.conf and slurmd's LimitMEMLOCK",
            )
        )
    shm = _df_sizes(facts.section("shm"))
    if shm is None:
        out.append(Result(n, "shm", WARN, "/dev/shm size unknown (df failed)"))
    elif shm[0] < SHM_MIN_BYTES:
        out.append(
            Result(
                n,
                "shm",
                WARN,
                f"/dev/shm is {shm[0] / GIB:.1f} GiB; the containers share it (--ipc=host: "
                "container.shm_size does not apply)",
                "NCCL and vLLM use /dev/shm: size the host's >= 8 GiB",
            )
        )
    else:
        out.append(
            Result(n, "shm", OK, f"/dev/shm {shm[0] / GIB:.0f} GiB, shared by the containers")
        )
    disk = _df_sizes(facts.section("disk"))
    if disk is None:
        out.append(Result(n, "disk", WARN, "free space where logs go unknown (df failed)"))
    elif disk[1] < DISK_FAIL_BYTES:
        out.append(
            Result(
                n,
                "disk",
                FAIL,
                f"{disk[1] / GIB:.2f} GiB free where logs go",
                "free space under logs.dir",
            )
        )
    elif disk[1] < DISK_WARN_BYTES:
        out.append(
            Result(
                n,
                "disk",
                WARN,
                f"{disk[1] / GIB:.1f} GiB free where logs go",
                "free space under logs.dir",
            )
        )
    else:
        out.append(Result(n, "disk", OK, f"{disk[1] / GIB:.0f} GiB free where logs go"))
    return out


def _df_sizes(section: Section | None) -> tuple[int, int] | None:
    """(total, available) bytes from `df -P -B1 PATH`."""
    rows = _lines(section) if section is not None and section.rc == 0 else []
    if len(rows) < 2:
        return None
    cols = rows[-1].split()
    if len(cols) < 4 or not (cols[1].isdigit() and cols[3].isdigit()):
        return None
    return int(cols[1]), int(cols[3])


def judge_nvidia_docker(facts: NodeFacts, expect: Expect) -> list[Result]:
    """`docker run --gpus all` (the NVIDIA presets) needs the NVIDIA Container Toolkit: the
    prestart hook on dockerd's PATH (moby daemon/nvidia_linux.go) or an "nvidia" runtime.
    Without it Docker refuses: 'could not select device driver "" with capabilities: [[gpu]]'."""
    section = facts.section("nvidia-docker")
    if expect.vendor != "nvidia" or not expect.gpus_per_node or expect.logical_gpus:
        return []
    if section is None:
        return []
    lines = _lines(section)
    hook = next((line for line in lines if line.startswith("/")), "")
    runtimes_line = next((ln for ln in lines if ln.startswith("runtimes:")), "runtimes:")
    listed = json_payload(runtimes_line[len("runtimes:") :].strip())
    runtimes = sorted(listed) if isinstance(listed, dict) else []
    if hook or "nvidia" in runtimes:
        how = f"hook {hook}" if hook else "the nvidia runtime"
        return [Result(facts.node, "nvidia-docker", OK, f"docker run --gpus works through {how}")]
    return [
        Result(
            facts.node,
            "nvidia-docker",
            FAIL,
            "no NVIDIA Container Toolkit for Docker (no nvidia-container-runtime-hook on PATH, "
            f"runtimes: {' '.join(runtimes) or 'unknown'}): docker run --gpus all would fail "
            "with 'could not select device driver'",
            "install nvidia-container-toolkit and run `nvidia-ctk runtime configure "
            "--runtime=docker`, then restart dockerd",
        )
    ]


def _judge_image(n: str, image: Section | None, expect: Expect) -> Result:
    if image is None or image.rc != 0:
        return Result(
            n,
            "image",
            WARN,
            f"{expect.image} is not on the node",
            "the job's preflight pulls or loads it (container.pull, load_from)",
        )
    if expect.image_id and _text(image) != expect.image_id:
        return Result(
            n,
            "image",
            WARN if expect.image_reloads else FAIL,
            f"{expect.image} here is {_text(image)[:19]}, the job's is {expect.image_id[:19]}",
            "the job's preflight loads the tarball over it"
            if expect.image_reloads
            else "docker rmi the stale image on this node, then load or pull the job's "
            "(clusterctl image save / load, container.pull: load)",
        )
    return Result(n, "image", OK, f"{expect.image} {_text(image)[:19]}")


def judge_docker(facts: NodeFacts, expect: Expect) -> list[Result]:
    n = facts.node
    docker = facts.section("docker")
    if docker is None or docker.rc != 0:
        said = (docker.stderr or docker.text) if docker else ""
        cause = (said.splitlines() or [""])[-1]
        installed = not (docker and docker.rc == 127)
        what = "docker daemon not reachable" if installed else "docker is not installed"
        return [
            Result(
                n,
                "docker",
                FAIL,
                f"{what}: {cause}".rstrip(": "),
                "start dockerd, or give the job's user access to its socket",
                # the node's own engine is down: a node-health finding; not when only this
                # user may not reach it
                drain=installed and "permission denied" not in cause.lower(),
            )
        ]
    out = [Result(n, "docker", OK, f"Docker engine {_text(docker)}")]
    out += judge_nvidia_docker(facts, expect)
    if not expect.bare:  # without a spec there is no image to judge
        out.append(_judge_image(n, facts.section("image"), expect))
    leftovers, unknown, others, ours = [], [], [], {}
    me = _text(facts.section("uid"))
    for line in _lines(facts.section("containers")):
        parts = line.split()
        if len(parts) < 3:
            continue
        job, cid, name, rest = parts[0], parts[1], parts[2], parts[3:]
        # uid=N: the user who started it (clusterctl >= 0.1 labels it; older: no label)
        owner = rest.pop(0).removeprefix("uid=") if rest and rest[0].startswith("uid=") else ""
        state = " ".join(rest) or "?"
        ours[cid] = name
        if expect.live_jobs is not None and job in expect.live_jobs:
            continue
        if owner and me and owner != me:
            # SLURM hides other users' jobs under PrivateData=jobs: not provably a leftover
            others.append(f"{name} (uid {owner}, job {job})")
        elif expect.live_jobs is None:
            unknown.append(f"{name} (job {job})")
        else:
            leftovers.append(f"{name} (job {job}, {state})")
    if leftovers:
        out.append(
            Result(
                n,
                "leftovers",
                FAIL,
                "containers of jobs that no longer run: " + ", ".join(leftovers),
                "remove them: docker rm -f NAME (they may hold GPUs and ports)",
            )
        )
    if others:
        out.append(
            Result(
                n,
                "leftovers",
                WARN,
                "clusterctl containers of other users whose jobs this user cannot see "
                "(SLURM's PrivateData=jobs hides them): " + ", ".join(others),
                "their owners or an admin remove them if their jobs have ended",
            )
        )
    if unknown:
        out.append(
            Result(
                n,
                "leftovers",
                WARN,
                "clusterctl containers whose job cannot be checked (no squeue here): "
                + ", ".join(unknown),
                "run verify where squeue works",
            )
        )
    processes = []
    for line in _lines(facts.section("processes")):
        pid, cgroup, args = ([*line.split(" ", 2), "", ""])[:3]
        if cgroup == "host":
            processes.append(f"pid {pid} on the host ({args[:60]})")
        elif cgroup not in ours:
            processes.append(f"pid {pid} in container {cgroup[:12]} ({args[:60]})")
    if processes:
        out.append(
            Result(
                n,
                "ray-processes",
                WARN,
                "Ray/vLLM processes clusterctl did not start: " + "; ".join(processes),
                "stop them (ray stop --force) unless they are yours on purpose",
            )
        )
    if not leftovers and not unknown and not others and not processes:
        out.append(Result(n, "leftovers", OK, "no leftover containers or Ray processes"))
    return out


def judge_network(facts: NodeFacts) -> list[Result]:
    n = facts.node
    out = []
    busy = [line.split()[0] for line in _lines(facts.section("ports")) if line.endswith(" in-use")]
    if busy:
        out.append(
            Result(
                n,
                "ports",
                FAIL,
                "ports in use: " + ", ".join(busy),
                "stop what listens there or change the ray.* ports",
            )
        )
    elif _lines(facts.section("ports")):
        out.append(
            Result(n, "ports", OK, f"{len(_lines(facts.section('ports')))} fixed ports free")
        )
    address = facts.section("address")
    text = _text(address) if address and address.rc == 0 else (address.text if address else "")
    if address is None or address.rc != 0:
        cause = re.sub(r"^.*?FAIL node=\S+ phase=\S+: ", "", text) if text else "no output"
        out.append(
            Result(
                n,
                "address",
                FAIL,
                cause,
                "set network.socket_ifname to the interface the nodes share",
            )
        )
    else:
        out.append(Result(n, "address", OK, f"Ray and NCCL will use {text}"))
    return out


def judge_node(facts: NodeFacts, expect: Expect) -> list[Result]:
    """Every per-node judge."""
    return [
        *judge_gpus(facts, expect),
        *judge_devices(facts, expect),
        *judge_fabric(facts, expect),
        *judge_limits(facts, expect),
        *judge_docker(facts, expect),
        *([] if expect.bare else judge_network(facts)),  # the job's ports and address rule
    ]


def _gpu_kind(inv: GpuInventory) -> str:
    """The node's GPU kinds: device ids where known ("device 0x74a1 gfx942"), else names."""
    if inv.identity:
        return ",".join(f"device {i}" for i in sorted(set(inv.identity)))
    return ",".join(sorted(set(inv.models)))


def _odd_ones(values: dict[str, str]) -> tuple[str, list[str]]:
    """The value most nodes share, and the nodes that differ from it."""
    common, _ = Counter(values.values()).most_common(1)[0]
    return common, sorted(node for node, v in values.items() if v != common)


def judge_across(nodes: list[NodeFacts], expect: Expect) -> list[Result]:
    """What must be identical on every node, and the clock offset between them."""
    out: list[Result] = []

    def same(
        check: str, values: dict[str, str], what: str, fix: str, shown: dict[str, str] | None = None
    ) -> None:
        """SHOWN: how a value reads, when it is an id (the first node's names for it)."""
        values = {k: v for k, v in values.items() if v}
        if len(values) < 2:
            return
        common, odd = _odd_ones(values)

        def show(value: str) -> str:
            names = (shown or {}).get(value)
            return f"{value} ({names})" if names else value

        for node in odd:
            out.append(
                Result(
                    node,
                    check,
                    FAIL,
                    f"{what} {show(values[node])}, other nodes {show(common)}",
                    fix,
                )
            )
        if not odd:
            out.append(Result("*", check, OK, f"{what} {show(common)} on all {len(values)} nodes"))

    if expect.vendor in ("amd", "nvidia") and expect.gpus_per_node:
        inventory = amd_inventory if expect.vendor == "amd" else nvidia_inventory
        invs = {f.node: inv for f in nodes if isinstance(inv := inventory(f), GpuInventory)}
        same(
            "driver",
            {k: v.driver for k, v in invs.items() if v},
            "GPU driver",
            "install the same driver on every node (or drain the odd one)",
        )
        runtime = "ROCm" if expect.vendor == "amd" else "CUDA"
        same(
            "runtime",
            {k: v.runtime for k, v in invs.items() if v},
            runtime,
            f"the same {runtime} release on every node",
        )
        # by PCI device id (and gfx target) where the tool gives them; the names are shown
        kinds = {k: _gpu_kind(v) for k, v in invs.items()}
        names: dict[str, str] = {}
        for node, kind in kinds.items():
            if kind != ",".join(sorted(set(invs[node].models))):
                names.setdefault(kind, ",".join(sorted(set(invs[node].models))))
        same(
            "gpu-model",
            kinds,
            "GPU model",
            "one GPU model per job: constrain the partition or --constraint",
            names,
        )
    same(
        "image-digest",
        {} if expect.bare else {f.node: _text(f.section("image")) for f in nodes},
        "image",
        "the same image on every node: re-load it (clusterctl image load) or pull by digest",
    )
    if expect.fabric in ("ib", "roce") and expect.gid_index is not None:
        kinds = {}
        for f in nodes:
            ports = [p for p in ib_ports(f) if not expect.hcas or p.device in expect.hcas]
            if ports:
                kinds[f.node] = ",".join(
                    sorted({f"{gid_kind(p.gid)} {p.gid_type}".strip() for p in ports})
                )
        same(
            "gid-kind",
            kinds,
            f"GID index {expect.gid_index} holds",
            "the same GID index must hold the same kind of GID on every node",
        )
    if expect.fabric in ("ib", "roce"):
        # every port at the rate the others run at: a port that trained down (HDR on an NDR
        # fabric, a bad cable) makes the whole ring run at its speed
        slowest = {}
        for f in nodes:
            rates = [p.rate_gbps for p in ib_ports(f) if not expect.hcas or p.device in expect.hcas]
            if rates:
                slowest[f.node] = f"{min(rates):g} Gb/s"
        same("ib-rate", slowest, "slowest port", "reseat the cable or replace the HCA; or drain")
    addresses: dict[str, list[str]] = {}
    for f in [] if expect.bare else nodes:
        addr = _text(f.section("address"))
        if addr:
            addresses.setdefault(addr, []).append(f.node)
    for addr, owners in addresses.items():
        if len(owners) > 1 and not addr.startswith("127."):
            for node in owners:
                out.append(
                    Result(
                        node,
                        "address",
                        FAIL,
                        f"{addr} is also the address of "
                        + ", ".join(o for o in owners if o != node),
                        "two nodes must not share an address: check network.socket_ifname",
                    )
                )
    offsets = {f.node: f.offset() for f in nodes}
    known = {k: v for k, v in offsets.items() if v is not None}
    if len(known) >= 2:
        median = sorted(known.values())[len(known) // 2]
        # a node's clock is known to within half the round trip that carried its answer
        slack = {f.node: ((f.received or 0) - (f.sent or 0)) / 2 for f in nodes}
        far = {
            k: v - median
            for k, v in known.items()
            if abs(v - median) > CLOCK_WARN_SECONDS + slack[k]
        }
        for node, off in sorted(far.items()):
            out.append(
                Result(
                    node,
                    "clock",
                    WARN,
                    f"clock {off:+.1f} s from the other nodes",
                    "run chrony/ntpd on every node",
                )
            )
        if not far:
            spread = max(known.values()) - min(known.values())
            out.append(Result("*", "clock", OK, f"clocks within {spread:.2f} s (round-trip bound)"))
    return out


def judge_all(
    nodes: Iterable[NodeFacts], expect: Expect, unreachable: dict[str, str] | None = None
) -> list[Result]:
    """Every result for NODES; UNREACHABLE maps nodes that returned nothing to why."""
    facts = list(nodes)
    out = [
        Result(node, "reachable", FAIL, why, "check that the node is up and reachable")
        for node, why in (unreachable or {}).items()
    ]
    for f in facts:
        out.extend(judge_node(f, expect))
    out.extend(judge_across(facts, expect))
    return out


def exit_status(results: Iterable[Result]) -> int:
    """Nagios-style: 0 all ok, 1 warnings, 2 failures, 3 a check that could not be judged."""
    statuses = {r.status for r in results}
    if FAIL in statuses:
        return 2
    return 3 if UNKNOWN in statuses else 1 if WARN in statuses else 0


def drainable(results: Iterable[Result]) -> dict[str, Result]:
    """node -> its first positive node-health finding: the only grounds for a drain."""
    first: dict[str, Result] = {}
    for r in results:
        if r.status == FAIL and r.drain and r.node != "*":
            first.setdefault(r.node, r)
    return first


def expect_from_json(
    text: str, live_jobs: frozenset[str] | None, image_id: str | None = None
) -> Expect:
    """The Expect the job carries as JSON (clusterctl/verify/expect.py writes it); IMAGE_ID:
    the tarball's, when the spec pins none."""
    raw = json.loads(text)
    return Expect(
        vendor=raw["vendor"],
        gpus_per_node=int(raw["gpus_per_node"]),
        image=raw["image"],
        fabric=raw.get("fabric"),
        hcas=tuple(raw.get("hcas", ())),
        gid_index=raw.get("gid_index"),
        live_jobs=live_jobs,
        image_id=raw.get("image_id") or image_id,
        container_memlock_unlimited=bool(raw.get("container_memlock_unlimited")),
        logical_gpus=bool(raw.get("logical_gpus")),
    )


def _words(path: str) -> list[str] | None:
    """The white-space separated words of a file the batch side wrote; None when absent."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return handle.read().split()


def main(argv: list[str]) -> int:
    """The job's preflight: judge DIR/*.gather, print failures as FAIL lines, write
    DIR/verify.json; argv: DIR EXPECT_JSON [STARTED ENDED] (the gather step's epoch times)."""
    directory, expect_text = argv[0], argv[1]
    window = (float(argv[2]), float(argv[3])) if len(argv) >= 4 else (None, None)
    live_words = _words(os.path.join(directory, "live-jobs"))
    live = None if live_words is None else frozenset(live_words)
    image_id = next(iter(_words(os.path.join(directory, "image-id")) or []), None)
    nodes: list[NodeFacts] = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".gather"):
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as handle:
                for facts in parse_gather(handle.read()):
                    facts.sent, facts.received = window
                    nodes.append(facts)
    results = judge_all(nodes, expect_from_json(expect_text, live, image_id))
    with open(os.path.join(directory, "verify.json"), "w", encoding="utf-8") as handle:
        json.dump([r.__dict__ for r in results], handle, indent=2)
    # slurm.drain_bad_nodes drains only these (templates/partials/cluster.sh.j2)
    with open(os.path.join(directory, "drainable.tsv"), "w", encoding="utf-8") as handle:
        for node, r in sorted(drainable(results).items()):
            handle.write(f"{node}\t{r.check}: {r.reason}\n")
    warned: dict[tuple[str, str, str], list[str]] = {}
    for r in results:
        fix = f" (fix: {r.fix})" if r.fix else ""
        if r.status == WARN:
            warned.setdefault((r.check, r.reason, fix), []).append(r.node)
        elif r.status == FAIL:
            print(f"clusterctl: FAIL node={r.node} phase=preflight: {r.check}: {r.reason}{fix}")
        elif r.status == UNKNOWN:
            # the job cannot tell the node is fit: it stops (or leaves the node out), naming
            # the tool's own words; the node is not drained for it
            print(
                f"clusterctl: FAIL node={r.node} phase=preflight: {r.check} cannot be judged: "
                f"{r.reason}{fix}"
            )
    # one line per warning, its nodes listed (the first few, then how many): not N lines
    for (check, reason, fix), where in warned.items():
        shown = ", ".join(where[:4]) + (f" and {len(where) - 4} more" if len(where) > 4 else "")
        print(f"clusterctl: [{shown}] warning: {check}: {reason}{fix}")
    counts = Counter(r.status for r in results)
    print(
        f"clusterctl: node checks on {len(nodes)} nodes: {counts[FAIL]} failed, "
        f"{counts[UNKNOWN]} could not be judged, {counts[WARN]} warnings, {counts[OK]} ok "
        f"(details in {directory}/verify.json)"
    )
    return 2 if counts[FAIL] or counts[UNKNOWN] else exit_status(results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
