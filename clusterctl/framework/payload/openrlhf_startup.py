"""Run OpenRLHF's own argument parser and start-up checks on an argv, without starting training.

Runs in a subprocess of clusterctl (standard library only): the ``if __name__ == "__main__":``
block of the pinned release's entry point (``openrlhf/cli/train_ppo_ray.py``: the parser, then
the assertions and fix-ups that run before ``train(args)``) is executed as OpenRLHF wrote it,
with ``train`` replaced by a stop. Nothing of OpenRLHF's package ``__init__`` runs (it imports
torch, DeepSpeed and vLLM): the submodules the block imports are loaded from their files.

    python3 openrlhf_startup.py SITE_DIR MODULE -- ARG...   (SITE_DIR -: where this Python has it)

Prints one JSON object: {"status": "ok" | "rejected" | "cannot-run", "message": "..."}; with
"ok", "args": the arguments as ``train`` receives them, by name (the memory plan reads them).
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import sys
import types
from pathlib import Path
from typing import Any


class _Stop(Exception):
    """``train(args)`` was reached: every start-up check passed; holds the args it got."""

    def __init__(self, args: object) -> None:
        self.parsed = args


def _stop(args: object) -> None:
    raise _Stop(args)


def _settings(args: object, prefix: str = "") -> dict[str, object]:
    """The parsed arguments, after OpenRLHF's own fix-ups, by name: nested namespaces
    (OpenRLHF >= 0.10.2's dotted flags) flattened to dotted names."""
    out: dict[str, object] = {}
    for name, value in vars(args).items():
        if hasattr(value, "__dict__") and not isinstance(value, type):
            out.update(_settings(value, f"{prefix}{name}."))
        elif isinstance(value, (str, int, float, bool, type(None))):
            out[prefix + name] = value
        elif isinstance(value, (list, tuple)):
            out[prefix + name] = [v if isinstance(v, (str, int, float)) else str(v) for v in value]
        else:
            out[prefix + name] = str(value)
    return out


def _main_block(source: str, filename: str) -> types.CodeType:
    """The module's standard-library imports, then its __main__ block."""
    tree = ast.parse(source, filename)
    stdlib = [
        node
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        and all(
            (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
            in sys.stdlib_module_names
            for alias in node.names
        )
    ]
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            block = ast.Module(body=[*stdlib, *node.body], type_ignores=[])
            return compile(block, filename, "exec")
    raise LookupError(f"{filename} has no __main__ block")


def _packages_without_init(site: Path, top: str) -> None:
    """Make ``top`` and its subpackages importable without running any __init__.py: a module
    the start-up block imports (openrlhf.utils.config) is then loaded from its own file."""
    for init in sorted((site / top).rglob("__init__.py")):
        name = ".".join(init.parent.relative_to(site).parts)
        package = types.ModuleType(name)
        package.__path__ = [str(init.parent)]
        sys.modules[name] = package


def judge(site: Path, module: str, argv: list[str]) -> dict[str, Any]:
    path = site.joinpath(*module.split(".")).with_suffix(".py")
    try:
        code = _main_block(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, LookupError) as exc:
        return {"status": "cannot-run", "message": str(exc)}
    sys.path.insert(0, str(site))
    _packages_without_init(site, module.split(".")[0])
    sys.argv = [str(path), *argv]
    namespace = {"__name__": "__main__", "train": _stop}
    stderr, stdout = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
            exec(code, namespace)
    except _Stop as stop:
        return {
            "status": "ok",
            "message": stdout.getvalue().strip(),
            "args": _settings(stop.parsed),
        }
    except SystemExit:
        lines = [ln for ln in stderr.getvalue().splitlines() if ln.strip()]
        return {"status": "rejected", "message": lines[-1] if lines else "the parser exited"}
    except AssertionError as exc:
        return {"status": "rejected", "message": f"AssertionError: {exc}"}
    except ImportError as exc:
        return {"status": "cannot-run", "message": f"the start-up checks import {exc.name}"}
    except Exception as exc:  # OpenRLHF's own check failed with another error
        return {"status": "rejected", "message": f"{type(exc).__name__}: {exc}"}
    return {"status": "cannot-run", "message": "the __main__ block never reached train(args)"}


if __name__ == "__main__":
    site_dir, entry, separator, *rest = sys.argv[1:]
    assert separator == "--"
    if site_dir == "-":  # where this Python has it (found, not imported: no __init__ runs)
        import importlib.util

        found = importlib.util.find_spec("openrlhf")
        locations = found.submodule_search_locations if found else None
        if not locations:
            print(json.dumps({"status": "cannot-run", "message": "openrlhf is not installed"}))
            sys.exit(0)
        site_dir = str(Path(next(iter(locations))).parent)
    verdict = judge(Path(site_dir), entry, rest)
    try:  # the release that judged, said with its verdict (the job's own image: issue 46)
        from importlib.metadata import version

        verdict["release"] = version("openrlhf")
    except Exception:  # not installed as a distribution (a --target directory): not named
        pass
    print(json.dumps(verdict))
