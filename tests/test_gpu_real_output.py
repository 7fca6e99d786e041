"""The GPU judges on real captured vendor output (tests/fixtures/verify/real, each file's source
in the README there): a tool that answers in a way that cannot be read is `unknown` with its own
words and the fix, never ok, never "0 GPUs", never a drain."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from clusterctl.verify.cli import drain_commands
from clusterctl.verify.judges.facts import (
    FAIL,
    OK,
    UNKNOWN,
    WARN,
    Expect,
    Result,
    json_payload,
    parse_gather,
)
from clusterctl.verify.judges.gpus import amd_inventory
from clusterctl.verify.judges.run import judge_all
from tests.test_verify import AMD, by_check, facts_of, gather_text, sections

REAL = Path(__file__).parent / "fixtures" / "verify" / "real"


def real(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


# amd-smi 25.3.0 (ROCm 6.4) as a user outside video/render: this WARNING line is the first line
# on stdout, then the command's own output (ROCm/amdsmi#130; the monitor capture's first line)
GROUP_WARNING = real("amd-smi-25.3.0-monitor-missing-groups-warning-mi300x-vf.txt").splitlines()[0]
KFD_8_GPUS = "\n".join(["0", *(str(40000 + i) for i in range(8))])  # CPU node 0, then 8 GPUs


def amd_node(list_rc: int, list_out: str, kfd: str | None = None) -> str:
    secs = sections("amd", **{"amd-smi-list": (list_rc, list_out)})
    if kfd is not None:
        secs["kfd-gpus"] = (0, kfd)
    return gather_text("gpu-1", secs)


def gpu_results(text: str) -> dict[str, object]:
    results = judge_all(facts_of(text), AMD)
    return {
        "gpus": by_check(results, "gpu-1", "gpus")[0],
        "processes": by_check(results, "gpu-1", "gpu-processes")[0],
        "drain": drain_commands(results),
    }


def test_rocm70_group_error_is_unknown_with_the_group_fix_and_no_drain() -> None:
    # ROCm 7.0: amd-smi raises and prints only this line (amdsmi#184)
    found = gpu_results(amd_node(1, real("amd-smi-rocm7.0-runtimeerror-missing-groups.txt")))
    gpus = found["gpus"]
    assert gpus.status == UNKNOWN  # type: ignore[attr-defined]
    assert "User is missing the following required groups" in gpus.reason  # type: ignore[attr-defined]
    assert "video and render" in gpus.fix  # type: ignore[attr-defined]
    assert "0 GPUs" not in gpus.reason  # type: ignore[attr-defined]
    assert found["drain"] == []


def test_rocm71_permission_block_is_unknown_but_kfd_still_counts_the_gpus() -> None:
    text = real("amd-smi-26.2.0-rocm7.1.1-permission-needed-device-nodes-partial.txt")
    found = gpu_results(amd_node(1, text, kfd=KFD_8_GPUS))
    gpus = found["gpus"]
    assert gpus.status == WARN  # type: ignore[attr-defined]
    assert "the kfd topology shows 8 GPUs" in gpus.reason  # type: ignore[attr-defined]
    assert "Permission needed" in gpus.reason  # type: ignore[attr-defined]
    assert found["processes"].status == UNKNOWN  # type: ignore[attr-defined]
    assert found["drain"] == []


def test_builtin_amdgpu_reads_as_amd_smi_not_seeing_a_loaded_driver() -> None:
    # amdgpu built into the kernel: amd-smi 26.1.0 finds no module state (amdsmi#172)
    text = real("amd-smi-26.1.0-driver-not-initialized-amdgpu-builtin.txt")
    found = gpu_results(amd_node(0, text, kfd=KFD_8_GPUS))
    assert found["gpus"].status == WARN  # type: ignore[attr-defined]
    assert "amdgpu built into the kernel" in found["gpus"].fix  # type: ignore[attr-defined]
    found = gpu_results(amd_node(0, text))  # no kfd topology either: cannot be judged
    assert found["gpus"].status == UNKNOWN and found["drain"] == []  # type: ignore[attr-defined]


def test_truncated_json_after_python_warnings_is_unknown_never_zero() -> None:
    text = real("amd-smi-static-json-gpu_data-python-syntaxwarning-rx7800xt-partial.txt")
    found = gpu_results(amd_node(0, text))
    assert found["gpus"].status == UNKNOWN  # type: ignore[attr-defined]


def test_group_warning_before_the_json_keeps_the_data() -> None:
    # amd-smi 25.x prints the WARNING on stdout, then the JSON (amdsmi#130); the JSON here is
    # a real `amd-smi static --asic --json` (OpenLinkHub#117)
    static = real("amd-smi-static-asic-json-list-granite-ridge-igpu.json")
    assert json_payload(f"{GROUP_WARNING}\n{static}") == json_payload(static)
    secs = sections("amd", **{"amd-smi-static": (0, f"{GROUP_WARNING}\n{static}")})
    inv = amd_inventory(facts_of(gather_text("gpu-1", secs))[0])
    assert inv is not None and not isinstance(inv, str)
    assert getattr(inv, "models", ()) == ("Granite Ridge [Radeon Graphics]",)


def test_stderr_is_kept_apart_from_stdout() -> None:
    text = (
        "@@cc-gather gpu-1 1000\n@@cc-section amd-smi-list rc=0\n[]\n"
        "@@cc-stderr amd-smi-list\n"
        + real("amd-smi-static-json-gpu_data-python-syntaxwarning-rx7800xt-partial.txt")
        .split("{")[0]
        .rstrip()
        + "\n@@cc-section end rc=0\n"
    )
    (node,) = parse_gather(text)
    section = node.section("amd-smi-list")
    assert section is not None and section.text == "[]"
    assert "SyntaxWarning" in section.stderr


def test_rocm_smi_card_series_in_both_spellings() -> None:
    # rocm-smi 6.0.2 (telegraf's capture): "Card series"; MI250X capture: "Card Series"
    for name, models in (
        ("rocm-smi-6.0.2-mi100x4-telegraf-flags.json", {"Arcturus GL-XL [Instinct MI100]"}),
        ("rocm-smi-showproductname-json-mi250x-card-series.json", None),
    ):
        secs = sections("amd", **{"amd-smi-list": (127, ""), "rocm-smi": (0, real(name))})
        inv = amd_inventory(facts_of(gather_text("gpu-1", secs))[0])
        found = set(getattr(inv, "models", ()))
        assert "?" not in found
        if models is not None:
            assert found == models and getattr(inv, "count", 0) == 4


def test_a_node_missing_a_gpu_is_drained_only_then() -> None:
    healthy = gpu_results(amd_node(0, (REAL.parent / "amd-smi-list.json").read_text()))
    assert healthy["gpus"].status == OK and healthy["drain"] == []  # type: ignore[attr-defined]


_NOISE = st.lists(
    st.text(
        alphabet=st.characters(
            blacklist_categories=("Cs",),
            blacklist_characters="\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
        ),
        max_size=60,
    ).filter(lambda line: not line.lstrip().startswith(("[", "{", "@@"))),
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(before=_NOISE, after=_NOISE)
def test_noise_around_real_output_keeps_the_verdict(before: list[str], after: list[str]) -> None:
    static = real("amd-smi-static-asic-json-list-granite-ridge-igpu.json")
    noisy = "\n".join([*before, static.rstrip("\n"), *after])
    assert json_payload(noisy) == json_payload(static)
    error = real("amd-smi-rocm7.0-runtimeerror-missing-groups.txt").rstrip("\n")
    found = gpu_results(amd_node(1, "\n".join([*before, error, *after])))
    assert found["gpus"].status in (UNKNOWN,) and found["drain"] == []  # type: ignore[attr-defined]
    assert found["gpus"].status != FAIL  # type: ignore[attr-defined]


# ---- a real H200 node (issue 43 item 1; fixtures/verify/h200/README.md) -------------------

H200_NODE = Expect(vendor="nvidia", gpus_per_node=1, image="x", fabric="ethernet", devices=())


def h200(name: str) -> list[Result]:
    text = (REAL.parent / "h200" / name).read_text(encoding="utf-8")
    return judge_all(facts_of(text), H200_NODE)


def test_a_node_without_ip_is_unknown_for_its_address_never_a_network_fault() -> None:
    results = h200("gather-ip-less.txt")
    (address,) = by_check(results, "vm", "address")
    assert address.status == UNKNOWN and address.reason == "unknown: ip is not on vm"
    assert "socket_ifname" not in address.fix and not address.drain
    (gpus,) = by_check(results, "vm", "gpus")
    assert gpus.status == OK and "NVIDIA H200" in gpus.reason
    assert by_check(results, "vm", "gpu-processes")[0].status == OK
    assert drain_commands(results) == []


def test_the_h200_held_by_a_foreign_process_fails_naming_its_pid() -> None:
    results = h200("gather-busy.txt")
    (held,) = by_check(results, "vm", "gpu-processes")
    assert held.status == FAIL and "1582" in held.reason
    assert by_check(results, "vm", "address")[0].status == UNKNOWN
