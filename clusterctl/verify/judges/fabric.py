"""Network judges: InfiniBand ports and their GID kinds, the interface and address the job uses."""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterctl.verify.judges.facts import (
    FAIL,
    OK,
    SKIP,
    UNKNOWN,
    Expect,
    NodeFacts,
    Result,
    _lines,
    _text,
)

# InfiniBand sysfs `state` of a usable port (linux drivers/infiniband/core/sysfs.c).
IB_ACTIVE = "4: ACTIVE"


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
        absent = re.search(r"(\S+): command not found", cause)  # a gather before 2026-11-28
        if cause.startswith("unknown: ") or absent:  # what the node lacks to tell, never a fault
            why = f"{absent.group(1)} is not on {n}" if absent else cause.removeprefix("unknown: ")
            fix = "install iproute2 on the node (ip), or mount /proc"
            out.append(Result(n, "address", UNKNOWN, f"unknown: {why}", fix))
            return out
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
