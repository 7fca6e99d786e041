"""How many launch scripts come through `clusterctl import` whole, under its dry run.

"Whole": import finds a trainer (no refusal), the spec it writes loads and validates (schema,
contradictions, the rules' errors), and the trainer argv the spec renders is the argv bash
produced in the dry run for that call, as the framework's own parser reads both (Hydra's
override grammar for verl; OpenRLHF's flags with their values). A script that runs no
trainer of either framework counts apart ("no trainer"), never as whole.

Corpora:
  --corpus launch   the frameworks' examples in tests/corpus/launch (committed)
  --corpus users    users' and labs' own scripts in tests/corpus/users/*/ with SOURCES.json
                    beside them (gathered from public repositories; kept out of commits)
Users' scripts are split by a hash of their source (repository or thread), never by hand:
sha256(source)'s first byte even is the development half, odd the held-out half.

    python -m benchmarks.import_corpus --corpus users [--out benchmarks/results/import_users.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from clusterctl.errors import SpecError
from clusterctl.importer.convert import ImportError_, import_script, to_yaml
from clusterctl.importer.shell import ScriptError
from clusterctl.lint import rules as _rules  # noqa: F401  (registers the rules)
from clusterctl.lint.registry import run_rules
from clusterctl.render.plan import openrlhf_args, verl_argv
from clusterctl.spec.loader import load_spec_text
from clusterctl.spec.models import OpenRLHFWorkload, VerlWorkload
from clusterctl.spec.secrets import KEY_FLAGS, secret_name

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = ROOT / "tests" / "corpus" / "launch"
USERS = ROOT / "tests" / "corpus" / "users"


def half_of(source: str) -> str:
    """development or held-out, by the first byte of the source's sha256."""
    return "development" if hashlib.sha256(source.encode()).digest()[0] % 2 == 0 else "held-out"


def hydra_view(args: list[str]) -> dict[str, Any]:
    """key -> value as Hydra reads the command line: its own argument parser for the
    --config-* options (either spelling), then each override (last one wins, as in Hydra)."""
    from hydra._internal.utils import get_args_parser
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = get_args_parser().parse_args(args)
    out: dict[str, Any] = {}
    for option in ("config_path", "config_name", "config_dir"):
        if getattr(parsed, option):
            out[option] = getattr(parsed, option).removesuffix(".yaml")
    parser = OverridesParser.create()
    for text in parsed.overrides:
        override = parser.parse_override(text)
        out[override.get_key_element()] = override.value()
    return out


def flag_groups(args: list[str]) -> dict[str, tuple[str, ...]]:
    """--flag -> its values, as argparse reads them: order aside, a flag given again keeps
    its last values (OpenRLHF's flags store, none appends)."""
    groups: list[list[str]] = []
    for word in args:
        if word.startswith("--"):
            groups.append(word.split("=", 1))
        elif groups:
            groups[-1].append(word)
    return {group[0]: tuple(group[1:]) for group in groups}


def judge(path: Path, args: list[str]) -> dict[str, Any]:
    """One script's outcome: whole, or the first thing that kept it from being whole."""
    try:
        imported = import_script(
            path.read_bytes(), {}, args=args, name=path.name, base=path.parent, path=path
        )
    except (ScriptError, ImportError_) as exc:
        text = str(exc)
        kind = "no trainer" if "no verl or OpenRLHF trainer" in text else "refused"
        return {"outcome": kind, "why": text[:300]}
    try:
        loaded = load_spec_text(to_yaml(imported, path.name), path.name)
    except SpecError as exc:
        return {"outcome": "not valid", "why": str(exc)[:300]}
    findings = run_rules(loaded.spec)
    errors = [f"{f.rule.id}: {f.message}" for f in findings if f.rule.severity == "error"]
    if errors:
        return {"outcome": "refused by a rule", "why": errors[0][:300]}
    wl = loaded.spec.workload
    trainer = _trainer_args(imported)
    if isinstance(wl, VerlWorkload) and trainer is not None:
        from hydra.errors import HydraException

        try:
            got, want = hydra_view(verl_argv(loaded.spec, wl)[3:]), hydra_view(trainer)
        except HydraException as exc:
            return {"outcome": "argv differs", "why": f"Hydra refuses the trainer's argv: {exc}"}
        owned = {"trainer.nnodes", "trainer.n_gpus_per_node"}
        # a secret is passed through from the environment, never written (spec/secrets.py)
        secret = {k for k in set(got) | set(want) if secret_name(k.lstrip("+~"), False)}
        keys = (set(got) | set(want)) - owned - secret
        diff = sorted(k for k in keys if got.get(k) != want.get(k))
        if diff:
            return {"outcome": "argv differs", "why": f"keys {diff[:5]}"}
    elif isinstance(wl, OpenRLHFWorkload) and trainer is not None:

        def kept(flag: str) -> bool:
            name = flag.lstrip("-")
            return name not in KEY_FLAGS and not secret_name(name, False)

        got_groups = {k: v for k, v in flag_groups(openrlhf_args(wl)).items() if kept(k)}
        want_groups = {k: v for k, v in flag_groups(trainer).items() if kept(k)}
        if got_groups != want_groups:
            return {"outcome": "argv differs", "why": "OpenRLHF flags differ"}
    return {
        "outcome": "whole",
        "framework": wl.framework,
        "entrypoint": getattr(wl, "entrypoint", None),
        "assumed": len(imported.assumed),
        "read_by": imported.read_by.split(",")[0],
    }


def _trainer_args(imported: Any) -> list[str] | None:
    """The trainer's own arguments as the dry run recorded them (after the module)."""
    return list(imported.trainer_args) or None


def users_corpus(trees: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Each script at its own path in a copy of its repository's tree under TREES (the
    corpus keeps one flat folder): a wrapper finds the sibling it runs, as in the user's
    checkout."""
    rows: list[tuple[Path, dict[str, Any]]] = []
    for sources in sorted(USERS.glob("*/SOURCES.json")):
        for row in json.loads(sources.read_text()):
            path = sources.parent / row["file"]
            if not path.is_file():
                continue
            repo = row.get("repo") or path.name.split("--")[0]
            inside = row["source_url"].split("/blob/", 1)[-1].split("/", 1)[-1]
            copy = trees / repo.replace("/", "--") / inside
            copy.parent.mkdir(parents=True, exist_ok=True)
            (trees / repo.replace("/", "--") / ".git").mkdir(exist_ok=True)
            shutil.copyfile(path, copy)
            rows.append((copy, row))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("launch", "users"), default="users")
    parser.add_argument("--out", type=Path)
    options = parser.parse_args(argv)
    results: list[dict[str, Any]] = []
    if options.corpus == "launch":
        for path in sorted(p for p in LAUNCH.glob("*/*") if p.suffix in (".sh", ".slurm")):
            record = json.loads(Path(f"{path}.argv.json").read_text())
            row: dict[str, Any] = {
                "file": f"{path.parent.name}/{path.name}",
                "half": "written-from",
            }
            row.update(judge(path, list(record.get("args") or [])))
            results.append(row)
    else:
        trees = Path(tempfile.mkdtemp(prefix="cc-users-corpus-"))
        for path, source in users_corpus(trees):
            origin = source.get("repo") or source.get("thread") or source["source_url"]
            text = path.read_bytes()
            row = {
                "file": source["file"],
                "source": source.get("source_url"),
                "sha256": hashlib.sha256(text).hexdigest(),
                "half": half_of(origin),
            }
            row.update(judge(path, []))
            results.append(row)
        shutil.rmtree(trees)
    summary: dict[str, Any] = {}
    for half in sorted({r["half"] for r in results}):
        rows = [r for r in results if r["half"] == half]
        counts = Counter(r["outcome"] for r in rows)
        summary[half] = {"scripts": len(rows), **dict(counts)}
    if options.out:  # before the printing, which a closed pipe may cut short
        options.out.write_text(json.dumps({"summary": summary, "scripts": results}, indent=1))
    print(json.dumps(summary, indent=1))
    for row in results:  # the held-out half's misses are not shown: rules come from the other
        if row["outcome"] != "whole" and row["half"] != "held-out":
            print(f"{row['half']:12} {row['outcome']:18} {row['file']}: {row.get('why', '')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
