"""The command line as a user runs it: exit codes, messages, nothing half-written."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT, run_cli


def test_help_lists_the_commands() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("validate", "render", "submit", "schema", "init", "rules", "dev-cluster"):
        assert command in result.stdout


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_validate(example: Path) -> None:
    result = run_cli("validate", str(example))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{example}: ok")


def test_bad_spec_exits_2_with_located_errors_and_writes_nothing(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("slurm:\n  nodes: -1\ncontainer:\n  imag: x\nworkload: {framework: verl}\n")
    out = tmp_path / "bundle"
    result = run_cli("render", str(spec), "-o", str(out))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert f"error: {spec}:2: slurm.nodes: must be at least 1 (got -1)" in lines
    assert f"error: {spec}:4: container.imag: unknown key; did you mean 'image'?" in lines
    assert lines[-1] == "3 problems; nothing was written"
    assert not out.exists()
    assert os.listdir(tmp_path) == ["bad.yaml"]


def test_missing_spec_file_is_a_clean_error(tmp_path: Path) -> None:
    result = run_cli("validate", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert "cannot read spec" in result.stderr and "Traceback" not in result.stderr


def test_lint_error_blocks_render_unless_allowed(tmp_path: Path) -> None:
    # an OpenRLHF example: a verl one would spend ~9 s a command in verl's own checks
    example = ROOT / "examples" / "openrlhf-mi300x-single-node.yaml"
    ray = ("--set", "versions.ray=2.12.0")
    blocked = run_cli("render", str(example), "-o", str(tmp_path / "b"), *ray)
    assert blocked.returncode == 2
    assert "[ray-2.12-rocm]" in blocked.stderr
    assert not (tmp_path / "b").exists()
    allow = ("--allow", "ray-2.12-rocm")
    allowed = run_cli("render", str(example), "-o", str(tmp_path / "b"), *ray, *allow)
    assert allowed.returncode == 0, allowed.stderr
    assert (tmp_path / "b" / "job.sbatch").exists()
    assert "[ray-2.12-rocm]" not in allowed.stderr  # allowed: not repeated on every command
    checked = run_cli("validate", str(example), *ray, *allow)
    assert checked.returncode == 0, checked.stderr
    assert "note: allowed by lint.allow / --allow: ray-2.12-rocm" in checked.stderr


def test_unknown_allowed_rule_is_an_error() -> None:
    result = run_cli(
        "validate", str(ROOT / "examples" / "cpu-dev-cluster.yaml"), "--allow", "no-such-rule"
    )
    assert result.returncode == 2 and "unknown rule id 'no-such-rule'" in result.stderr


def test_render_stdout_is_the_script_that_render_writes(tmp_path: Path) -> None:
    example = str(ROOT / "examples" / "cpu-dev-cluster.yaml")
    printed = run_cli("render", example, "--stdout")
    written = run_cli("render", example, "-o", str(tmp_path / "b"))
    assert written.returncode == 0
    assert printed.stdout == (tmp_path / "b" / "job.sbatch").read_text()


def test_submit_dry_run_shows_exactly_what_submit_sends(tmp_path: Path) -> None:
    example = str(ROOT / "examples" / "cpu-dev-cluster.yaml")
    dry = run_cli("submit", example, "--dry-run", "-o", str(tmp_path / "b"))
    assert dry.returncode == 0
    first, script = dry.stdout.split("\n", 1)
    assert first == f"# sbatch --parsable {tmp_path / 'b' / 'job.sbatch'}"
    assert script == run_cli("render", example, "--stdout").stdout
    assert not (tmp_path / "b").exists()


def test_schema_is_json_schema_of_the_spec() -> None:
    result = run_cli("schema")
    schema = json.loads(result.stdout)
    assert schema["title"] == "clusterctl job spec"
    assert {"slurm", "container", "workload", "ray", "network"} <= set(schema["properties"])
    assert schema["required"] == ["container", "workload"]


@pytest.mark.parametrize("preset", ["mi300x", "h100", "none"])
@pytest.mark.parametrize("framework", ["verl", "openrlhf", "command"])
def test_init_writes_a_spec_that_validates_and_renders(
    tmp_path: Path, preset: str, framework: str
) -> None:
    spec = tmp_path / "job.yaml"
    created = run_cli("init", "--preset", preset, "--framework", framework, "-o", str(spec))
    assert created.returncode == 0
    if framework != "command" and preset == "none":
        result = run_cli("validate", str(spec))
        assert result.returncode == 2 and "[trainer-needs-gpus]" in result.stderr
        return
    rendered = run_cli("render", str(spec), "-o", str(tmp_path / "b"))
    assert rendered.returncode == 0, rendered.stderr
    again = run_cli("init", "-o", str(spec))
    assert again.returncode == 2 and "not overwriting" in again.stderr


def test_rules_lists_every_rule_with_fix_and_source() -> None:
    result = run_cli("rules", "--json")
    rules = json.loads(result.stdout)
    assert len(rules) >= 20
    for rule in rules:
        assert rule["fix"] and rule["source"] and rule["severity"] in ("error", "warning")
    assert len({r["id"] for r in rules}) == len(rules)


def test_a_ten_line_cpu_spec_validates_and_renders(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "slurm:\n  nodes: 2\ncontainer:\n  image: clusterctl/dev:latest\n"
        "network:\n  socket_ifname: eth0\nworkload:\n  framework: command\n"
        "  command: python3 train.py\n"
    )
    result = run_cli("render", str(spec), "-o", str(tmp_path / "b"))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no warning either
    script = (tmp_path / "b" / "job.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "CC_WORKLOAD=(\n  'bash'\n  '-c'\n" in script


def test_job_exit_status_reads_slurm_code_and_signal_as_sbatch_wait_would() -> None:
    from clusterctl.submit import job_exit_status

    assert job_exit_status("0:0") == 0
    assert job_exit_status("3:0") == 3
    assert job_exit_status("0:15") == 143
    assert job_exit_status("") is None


# issue 21 item 2: `clusterctl --help` and a command's --help load none of the heavy
# libraries; the commands that use them import them (the time: benchmarks/startup.py)
HEAVY = ("pydantic", "rich", "paramiko", "docker", "ray", "yaml", "jinja2", "re2")


@pytest.mark.parametrize("argv", [[], ["--help"], ["validate", "--help"], ["doctor", "--help"]])
def test_the_cli_starts_without_its_heavy_libraries(argv: list[str]) -> None:
    code = (
        "import sys\n"
        "import clusterctl.cli\n"
        f"argv = {argv!r}\n"
        "if argv:\n"
        "    try:\n"
        '        clusterctl.cli.main(argv, prog_name="clusterctl")\n'
        "    except SystemExit:\n"
        "        pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, check=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout  # fmt: skip
    assert out.strip().splitlines()[-1] == "[]", out


def _runtime_imports(path: Path) -> set[str]:
    """The clusterctl modules a file imports when it runs (not under `if TYPE_CHECKING:`)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.ImportFrom) and (child.module or "").startswith("clusterctl"):
                found.add(str(child.module))
                found.update(f"{child.module}.{alias.name}" for alias in child.names)
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    package = ROOT / "clusterctl"
    modules = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for p in package.rglob("*.py")
    }
    edges = {m: _runtime_imports(p) & set(modules) - {m} for m, p in modules.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges[todo.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False

    assert len(modules) > 60
    circles = sorted((a, b) for a in modules for b in edges[a] if a < b and reaches(b, a))
    assert circles == []
