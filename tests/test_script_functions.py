"""The generated script's own functions, run in a real bash on captured command output."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from clusterctl.render import render_bundle
from clusterctl.render.bundle import ray_wait_source
from clusterctl.spec import load_spec
from tests.conftest import ROOT

IP = ROOT / "tests" / "fixtures" / "ip"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """job.sbatch without its last line (the call of cc_main): settings plus functions."""
    script = render_bundle(load_spec(ROOT / "examples" / "cpu-dev-cluster.yaml").spec).script
    body, last = script.rstrip("\n").rsplit("\n", 1)
    assert last == 'cc_main "$@"'
    path = tmp_path_factory.mktemp("lib") / "lib.sh"
    path.write_text(body + "\n")
    return path


def bash(library: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'source "$0"\n{code}', str(library)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def address(
    library: Path, ip_output: Path, ifname: str = "", source: str = "interface", loopback: int = 0
) -> subprocess.CompletedProcess[str]:
    return bash(
        library,
        f"""
ip() {{ cat {ip_output}; }}
CC_NODE=gpu-1 CC_SOCKET_IFNAME='{ifname}' CC_ADDRESS_SOURCE={source} CC_ALLOW_LOOPBACK={loopback}
cc_node_address""",
    )


@pytest.mark.parametrize(
    "fixture, ifname, expected",
    [
        ("gpu-node.txt", "", "10.124.46.192"),  # skips lo and docker0
        ("gpu-node.txt", "ib0", "192.168.100.12"),  # the fabric interface when named
        ("this-host.txt", "", "192.0.2.2"),
    ],
)
def test_node_address_picks_a_reachable_interface(
    library: Path, fixture: str, ifname: str, expected: str
) -> None:
    result = address(library, IP / fixture, ifname)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


@pytest.mark.parametrize(
    "fixture, ifname, cause",
    [
        ("no-usable.txt", "", "no usable IPv4 address (set network.socket_ifname)"),
        ("gpu-node.txt", "docker0", "docker0 is a container bridge"),
        ("gpu-node.txt", "enp0s20f0u1u6", "169.254.3.1 is link-local"),
        ("gpu-node.txt", "lo", "127.0.0.1 is loopback"),
        (
            "gpu-node.txt",
            "ib1",
            "no interface that network.socket_ifname=ib1 selects has a usable IPv4 address",
        ),
    ],
)
def test_node_address_refuses_unreachable_addresses(
    library: Path, fixture: str, ifname: str, cause: str
) -> None:
    result = address(library, IP / fixture, ifname)
    assert result.returncode == 1
    assert result.stderr.startswith("clusterctl: FAIL node=gpu-1 phase=address: ")
    assert cause in result.stderr


def test_loopback_only_when_the_spec_allows_it(library: Path) -> None:
    result = address(library, IP / "gpu-node.txt", "lo", loopback=1)
    assert result.returncode == 0 and result.stdout.strip() == "127.0.0.1"


def test_without_ip_the_addresses_come_from_the_kernels_tables(
    library: Path, tmp_path: Path
) -> None:
    """A node without iproute2 (a real H200 VM had none): the kernel's tables give what `ip`
    gives, judged by the real ip in a network namespace of the test's own (a veth pair, three
    addresses), and the job's address rule picks the same address from either."""
    tools = tmp_path / "bin"  # the commands the fallback uses, and no ip
    tools.mkdir()
    for tool in ("awk", "sort", "cat"):
        (tools / tool).symlink_to(subprocess.run(
            ["bash", "-c", f"command -v {tool}"], capture_output=True, text=True, check=True
        ).stdout.strip())  # fmt: skip
    code = f"""
mount -t sysfs sysfs /sys  # this namespace's interfaces in /sys/class/net
ip link set lo up
ip link add cc0 type veth peer name cc1
ip addr add 10.20.30.40/24 dev cc0; ip addr add 10.99.0.7/16 dev cc0
ip addr add 192.168.77.5/28 dev cc1; ip link set cc0 up; ip link set cc1 up
CC_NODE=gpu-1 CC_SOCKET_IFNAME= CC_ADDRESS_SOURCE=interface CC_ALLOW_LOOPBACK=0
ip -o -4 addr show > {tmp_path}/ip.txt; cc_node_address > {tmp_path}/ip-pick.txt
PATH={tools}
cc_ipv4_addresses > {tmp_path}/kernel.txt; cc_node_address > {tmp_path}/kernel-pick.txt
"""
    ran = subprocess.run(
        ["unshare", "--net", "--mount", "bash", "-c", f'source "$0"\n{code}', str(library)],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr

    def listed(name: str) -> list[tuple[str, str]]:
        lines = (tmp_path / name).read_text().splitlines()
        return [(line.split()[1], line.split()[3]) for line in lines]

    by_ip = listed("ip.txt")
    assert len(by_ip) == 4 and listed("kernel.txt") == by_ip
    picked = (tmp_path / "ip-pick.txt").read_text()
    assert picked == (tmp_path / "kernel-pick.txt").read_text() != ""


def test_node_address_from_slurm(library: Path) -> None:
    result = bash(
        library,
        """
sinfo() { printf '10.0.3.7\n10.0.3.7\n'; } # -o %o, a line per partition of the node
CC_NODE=gpu-1 CC_ADDRESS_SOURCE=slurm CC_ALLOW_LOOPBACK=0
cc_node_address""",
    )
    assert result.returncode == 0 and result.stdout.strip() == "10.0.3.7"


def test_cause_prefers_the_exception_line(library: Path) -> None:
    output = (
        'Traceback (most recent call last):\n  File "x.py", line 3\n'
        "    raise RuntimeError(error_message)\n"
        "RuntimeError: Version mismatch: The cluster was started with:\n    Ray: 2.60.0\n"
    )
    result = subprocess.run(
        ["bash", "-c", 'source "$0"; cc_cause "$1"', str(library), output],
        capture_output=True,
        text=True,
    )
    assert result.stdout == "RuntimeError: Version mismatch: The cluster was started with:"


def test_cause_falls_back_to_error_lines_then_the_last_line(library: Path) -> None:
    def cause(text: str) -> str:
        return subprocess.run(
            ["bash", "-c", 'source "$0"; cc_cause "$1"', str(library), text],
            capture_output=True,
            text=True,
        ).stdout

    docker = (
        "docker: Error response from daemon: error setting rlimit type 7.\n\n"
        "Run 'docker run --help' for more information\n"
    )
    assert cause(docker).startswith("docker: Error response from daemon")
    assert cause("step one\nstep two\n") == "step two"


def test_json_strings_are_escaped(library: Path) -> None:
    result = subprocess.run(
        ["bash", "-c", 'source "$0"; cc_json_str "$1"', str(library), 'say "hi"\\ok\tnow'],
        capture_output=True,
        text=True,
    )
    assert result.stdout == 'say \\"hi\\"\\\\ok now'


# issue 29 item 8: a cause quoting bytes that are not UTF-8 still makes a strict JSON string
def test_json_strings_drop_bytes_that_are_not_utf8(library: Path) -> None:
    cause = b"torch: \xff\xfe broken \xe2\x9c\x93 ok \xe2\x9c"  # the last character cut short
    result = subprocess.run(
        ["bash", "-c", 'source "$0"; cc_json_str "$1"', str(library), cause],
        capture_output=True,
    )
    assert result.returncode == 0
    entry = json.loads(b'{"cause": "' + result.stdout + b'"}')  # bytes: decoded strictly
    assert entry["cause"] == "torch:  broken \u2713 ok "


def test_fail_from_log_reports_the_first_node_failure(library: Path, tmp_path: Path) -> None:
    log = tmp_path / "nodes.log"
    log.write_text(
        "clusterctl: [node1] ray head started\n"
        "clusterctl: FAIL node=node3 phase=ray-join: cannot reach 10.0.0.1:6379\n"
        "clusterctl: FAIL node=node2 phase=container: later\n"
    )
    result = bash(library, f'CC_LOG_DIR={tmp_path}; cc_fail_from_log {log} "fallback"; echo not')
    assert result.returncode == 1 and "not" not in result.stdout
    assert result.stderr.strip() == (
        "clusterctl: FAIL node=node3 phase=ray-join: cannot reach 10.0.0.1:6379"
    )


def test_fail_from_log_falls_back_to_srun_naming_the_node(library: Path, tmp_path: Path) -> None:
    log = tmp_path / "preflight.log"  # captured: the task's own line never reached srun
    log.write_text(
        "srun: error: node2: task 1: Exited with exit code 1\n"
        "srun: launch/slurm: _step_signal: Terminating StepId=81.0\n"
        "srun: error: node1: task 0: Terminated\n"
    )
    result = bash(
        library,
        f'CC_LOG_DIR={tmp_path}; CC_PHASE=preflight; cc_fail_from_log {log} "preflight failed"',
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "clusterctl: FAIL node=node2 phase=preflight: its task "
        "failed (Exited with exit code 1) before reporting why; "
        "preflight failed"
    )


@pytest.mark.parametrize(
    "num_cpus, slurm, expected",
    [
        ("", "1(x3)", "1"),  # captured from the dev cluster
        ("", "96", "96"),
        ("", "96,64(x2)", ""),  # nodes differ: no per-node check
        ("12", "96(x2)", "12"),  # ray.num_cpus wins
    ],
)
def test_expected_cpus_follow_slurm_or_the_spec(
    library: Path, num_cpus: str, slurm: str, expected: str
) -> None:
    result = bash(
        library, f"CC_RAY_NUM_CPUS='{num_cpus}' SLURM_JOB_CPUS_PER_NODE='{slurm}' cc_expected_cpus"
    )
    assert result.returncode == 0 and result.stdout.strip() == expected


@pytest.mark.parametrize(
    "ifname, expected",
    [
        ("^docker0,lo", "10.124.46.192"),  # exclusion: the first usable one left
        ("^lo,docker,eno", "192.168.100.12"),
        ("en", "10.124.46.192"),  # a prefix, as NCCL reads NCCL_SOCKET_IFNAME
        ("=ib0", "192.168.100.12"),
        ("eth,ib", "192.168.100.12"),
    ],
)
def test_nccl_socket_ifname_forms_select_the_address(
    library: Path, ifname: str, expected: str
) -> None:
    result = address(library, IP / "gpu-node.txt", ifname)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_exact_interface_name_that_is_only_a_prefix_fails_naming_it(library: Path) -> None:
    result = address(library, IP / "gpu-node.txt", "=ib")
    assert result.returncode == 1
    assert "network.socket_ifname==ib selects" in result.stderr


def test_a_stuck_node_command_does_not_hold_off_the_signal_trap(library: Path) -> None:
    # bash defers a trap until the foreground command ends; cc_node_try waits in the
    # background, so the trap (the node's cleanup) runs at once and the child is ended.
    result = bash(
        library,
        """
trap 'echo trapped; [[ -z $CC_NODE_CHILD ]] || kill "$CC_NODE_CHILD"; exit 143' TERM
(sleep 1; kill -TERM $$) &
start=$SECONDS
cc_node_try sleep 60
echo "not reached after $((SECONDS - start))s"
""",
    )
    assert result.returncode == 143, result.stdout + result.stderr
    assert result.stdout.strip() == "trapped"


def test_node_try_keeps_the_output_and_status(library: Path) -> None:
    result = bash(
        library, 'cc_node_try bash -c "echo out; echo err >&2; exit 3" || echo "$? $CC_TRY_OUT"'
    )
    assert result.stdout.split() == ["3", "out", "err"]


def test_consequences_list_every_other_failure_once(library: Path, tmp_path: Path) -> None:
    (tmp_path / "nodes.log").write_text(
        "clusterctl: FAIL node=node2 phase=workload: node2 lost: Ray marked it dead\n"
        "clusterctl: FAIL node=node1 phase=workload: container cc-9-node1 exited\n"
    )
    (tmp_path / "watch.log").write_text(
        "clusterctl: FAIL node=node2 phase=workload: node2 lost: Ray marked it dead\n"
        'clusterctl: FAIL node=node3 phase=workload: a "quoted" cause\n'
    )
    result = bash(
        library,
        f"CC_LOG_DIR={tmp_path} CC_FAIL_CAUSE='node2 lost: Ray marked it dead'\n"
        'printf "[%s]" "$(cc_consequences)"',
    )
    assert json.loads(result.stdout) == [
        "node=node1 phase=workload: container cc-9-node1 exited",
        'node=node3 phase=workload: a "quoted" cause',
    ]


def test_waiter_runs_from_its_stdin_with_the_node_names_after_it(
    library: Path, tmp_path: Path
) -> None:
    """The waiter's source and the node names reach python3 through stdin, framed by the
    source's size in bytes (non-ASCII included): argv carries neither, whatever their size."""
    names = [f"node{i:05d}" for i in range(20000)]  # 200 KB of names: over one argv string
    listed = tmp_path / "allocation.txt"
    listed.write_text("\n".join(names) + "\n")
    (tmp_path / "logs").mkdir()
    result = bash(
        library,
        f"""
CC_LOG_DIR={tmp_path}/logs CC_HEAD_NODE=node00000 CC_PHASE_TOKEN=t5ecret
mapfile -t CC_NODE_LIST < {listed}
export LC_ALL=C.UTF-8
CC_RAY_WAIT_PY+=$'\\nNOTE = "µs — a source cut short is a syntax error"'
cc_write_waiter_input
python3 -c "$CC_WAITER_BOOT" "$CC_WAITER_SIZE" --address 127.0.0.1:1 --head-ip 127.0.0.1 \\
  --nodes - --phase-token - --start-deadline 1 --join-deadline 1 < "$CC_LOG_DIR/waiter.in"
""",
    )
    waiter = ray_wait_source()  # the joined modules the script carries
    sent = (tmp_path / "logs" / "ray_wait.py").read_text()
    assert sent == waiter + '\nNOTE = "µs — a source cut short is a syntax error"\n'
    assert (tmp_path / "logs" / "node-names.txt").read_text().split() == names
    # the phase nonce travels on stdin, between the source and the names (issue 20 item 5)
    framed = (tmp_path / "logs" / "waiter.in").read_bytes()
    assert framed == sent.encode() + b"t5ecret\n" + "".join(f"{n}\n" for n in names).encode()
    assert (tmp_path / "logs" / "waiter.in").stat().st_mode & 0o077 == 0
    # the real waiter ran: it parsed its arguments and asked the (absent) head
    assert "GCS at 127.0.0.1:1 did not answer" in result.stderr + result.stdout
    assert 'CLUSTERCTL_RESULT {"status": "head-timeout"}' in result.stdout


def test_a_waiter_frame_of_the_wrong_size_is_refused_never_run(
    library: Path, tmp_path: Path
) -> None:
    """Bytes past the source are node names: a size that is off must not run them."""
    (tmp_path / "logs").mkdir()
    result = bash(
        library,
        f"""
CC_LOG_DIR={tmp_path}/logs CC_HEAD_NODE=n1 CC_PHASE_TOKEN=t CC_NODE_LIST=('print("ran")')
cc_write_waiter_input
size=${{CC_WAITER_SIZE%%:*}}
python3 -c "$CC_WAITER_BOOT" "$((size + 20)):${{CC_WAITER_SIZE#*:}}" < "$CC_LOG_DIR/waiter.in"
""",
    )
    assert result.returncode == 1 and "ran" not in result.stdout
    assert "the Ray waiter source arrived damaged" in result.stderr


def deadman(library: Path, tmp_path: Path, beat_age: int, squeue_says: str) -> str:
    """cc_node_deadman over 20 rounds of its loop (its sleep stubbed), the heartbeat BEAT_AGE
    seconds old, squeue printing SQUEUE_SAYS; the calls it made to SLURM and docker."""
    (tmp_path / "heartbeat").touch()
    os.utime(tmp_path / "heartbeat", (time.time() - beat_age,) * 2)
    result = bash(
        library,
        f"""
CC_LOG_DIR={tmp_path} CC_JOB_ID=7 CC_RUN=0 CC_NODE=node2 CC_CONTAINER=cc-7-node2
CC_ORPHAN_TIMEOUT=60 rounds=0
sleep() {{ ((++rounds <= 20)) || exit 0; }}
squeue() {{ echo "squeue $*" >> {tmp_path}/calls; printf '%s\\n' '{squeue_says}'; }}
docker() {{ echo "docker $*" >> {tmp_path}/calls; }}
cc_node_deadman""",
    )
    assert result.returncode == 0, result.stderr
    calls = tmp_path / "calls"
    return calls.read_text() if calls.exists() else ""


# issue 29 item 6: while the batch side beats, no node asks slurmctld anything
def test_dead_mans_switch_asks_slurm_nothing_while_the_heartbeat_is_fresh(
    library: Path, tmp_path: Path
) -> None:
    assert deadman(library, tmp_path, 0, "CANCELLED|0|") == ""


def test_dead_mans_switch_removes_the_container_of_a_job_slurm_no_longer_runs(
    library: Path, tmp_path: Path
) -> None:
    calls = deadman(library, tmp_path, 30, "CANCELLED|0|")
    assert calls.splitlines() == [
        "squeue -h -t all -j 7 -O State:|,RestartCnt:|",
        "docker rm -f cc-7-node2",
    ]
    assert (
        "dead man's switch: SLURM reports job 7 CANCELLED" in (tmp_path / "orphans.log").read_text()
    )


def test_dead_mans_switch_asks_at_most_every_15_s_and_knows_a_requeue(
    library: Path, tmp_path: Path
) -> None:
    # the heartbeat is late but the job still runs: one question in the 20 quick rounds
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert deadman(library, tmp_path / "a", 30, "RUNNING|0|").count("squeue") == 1
    calls = deadman(library, tmp_path / "b", 30, "RUNNING|1|")  # run 1 of the job is on
    assert calls.splitlines()[-1] == "docker rm -f cc-7-node2"
    assert "requeued" in (tmp_path / "b" / "orphans.log").read_text()


def test_gather_output_can_hold_no_marker(library: Path) -> None:
    result = subprocess.run(
        ["bash", "-c", 'source "$0"; cc_gather_inert "$1"', str(library),
         "@@cc-gather a 1\nlabel\n@@cc-section gpus rc=0\n@@ x"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.stdout == " @@cc-gather a 1\nlabel\n @@cc-section gpus rc=0\n @@ x"


def stall_watch(library: Path, log_dir: Path, script: str) -> subprocess.CompletedProcess[str]:
    """cc_check_progress on a workload log the test writes, its clock set by SECONDS=."""
    return bash(
        library,
        f"""
cc_on_stall() {{ echo "stall after $1s ($2)"; }}
CC_LOG_DIR={log_dir} CC_STALL_SECONDS=10 CC_FIRST_PROGRESS_SECONDS=100
CC_PROGRESS_PATTERN='^step [0-9]+'
{script}""",
    )


def test_the_first_progress_line_has_its_own_window_then_stall_seconds_applies(
    tmp_path: Path, library: Path
) -> None:
    log = tmp_path / "workload.log"
    log.write_text("loading the model\n")
    # start-up output that is no progress line: only first_progress_seconds ends it
    quiet = stall_watch(
        library, tmp_path, "cc_check_progress; SECONDS=50; cc_check_progress; echo alive"
    )
    assert quiet.stdout == "alive\n", quiet.stderr
    late = stall_watch(library, tmp_path, "cc_check_progress; SECONDS=101; cc_check_progress")
    assert late.stdout == "stall after 101s (watch.first_progress_seconds)\n", late.stderr
    # after a progress line, stall_seconds is the window
    script = f"""cc_check_progress; SECONDS=30; echo 'step 1' >> {log}; cc_check_progress
SECONDS=35; cc_check_progress; echo "progress: $(cat {tmp_path}/progress)"
SECONDS=41; cc_check_progress"""
    steps = stall_watch(library, tmp_path, script)
    assert steps.stdout == "progress: step 1\nstall after 11s (watch.stall_seconds)\n", steps.stderr


def test_nodes_read_the_waiters_own_count_of_the_nodes_alive(
    library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cc_ray_alive reads the lines the waiter prints (its own say()); a worker left to
    register waits for N/N, and gives up when its raylet is gone."""
    from clusterctl.runtime.report import say

    log = tmp_path / "cluster.log"
    lines = []
    for alive in (1, 3):
        say(f"ray: {alive}/4 nodes alive")
        lines.append(capsys.readouterr().out)
    log.write_text("".join(lines))
    setup = f"CC_LOG_DIR={tmp_path}; CC_JOIN_DEADLINE=30\n"
    assert bash(library, setup + "cc_ray_alive").stdout == "3 4\n"
    # the raylet is gone (docker top lists no raylet): the node would never register
    gone = setup + 'docker() { echo "  PID COMMAND"; }\n'
    gone += "if cc_node_await_registration; then echo 0; else echo $?; fi"
    assert bash(library, gone).stdout == "1\n"
    say("ray: 4/4 nodes alive")
    log.write_text(log.read_text() + capsys.readouterr().out)
    assert bash(library, gone).stdout == "0\n"
    (tmp_path / "cluster.log").unlink()
    assert bash(library, setup + "cc_ray_alive").stdout == ""


@pytest.mark.parametrize(
    "status, named", [(139, ", SIGSEGV"), (137, ", SIGKILL"), (143, ", SIGTERM"), (1, ""), (12, "")]
)
def test_a_status_a_signal_caused_is_named(library: Path, status: int, named: str) -> None:
    # the waiter's 139 at 24 nodes here read "(exit 139)" alone
    result = bash(library, f"cc_signal_of {status}")
    assert result.returncode == 0, result.stderr
    assert result.stdout == named


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant another user's file")
def test_a_node_loads_only_its_own_copy_of_the_image_tarball(library: Path, tmp_path: Path) -> None:
    """issue 42 item 3: with load_via sbcast each node loads cc-JOB-image.tar from the shared
    load_stage, a name another user can take first (sbcast only warns when it cannot
    overwrite it): a file of another user, a link or a directory there is refused."""
    stage = tmp_path / "stage"
    stage.mkdir()
    own = stage / "own.tar"
    own.write_bytes(b"tar")
    theirs = stage / "theirs.tar"
    theirs.write_bytes(b"tar")
    os.chown(theirs, 65534, 65534)  # nobody
    link = stage / "link.tar"
    link.symlink_to(own)
    folder = stage / "dir.tar"
    folder.mkdir()
    said = {
        name: bash(library, f"cc_own_copy {stage / name}").returncode
        for name in ("own.tar", "theirs.tar", "link.tar", "dir.tar", "absent.tar")
    }
    assert said == {"own.tar": 0, "theirs.tar": 1, "link.tar": 1, "dir.tar": 1, "absent.tar": 0}
