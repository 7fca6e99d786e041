"""The Python a job script carries: a package's modules joined into one source.

The Ray waiter runs in the head container and the preflight judges on the batch host, where
clusterctl is not installed, from one source read from standard input. The source registers
each module of its package under its own name, in the order their imports of each other ask,
so that ``from clusterctl.runtime.report import say`` resolves from ``sys.modules``; then it
runs the entry module's ``main``. Each module travels base64-encoded: its text needs no
quoting in the script's shell variable. The carried modules replace any installed clusterctl in that
process: what runs is what the script carries.
"""

from __future__ import annotations

import ast
import base64
import functools
import graphlib
from importlib import resources

BOOT = """\
# the modules of {package}, joined into one source (clusterctl/render/payload.py)
import base64 as _base64
import sys as _sys
import types as _types


def _register(name, encoded=None):
    source = None if encoded is None else _base64.b64decode(encoded).decode()
    module = _types.ModuleType(name)
    module.__file__ = name.replace(".", "/") + (".py" if source is not None else "/__init__.py")
    if source is None:
        module.__path__ = []
    _sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(_sys.modules[parent], child, module)
    if source is not None:
        exec(compile(source, module.__file__, "exec"), module.__dict__)


"""


def _imports(package: str, source: str) -> set[str]:
    """The modules of PACKAGE that SOURCE imports (by their short names)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(package + "."):
                found.add(node.module.removeprefix(package + "."))
            elif node.module == package:
                found.update(alias.name for alias in node.names)
    return found


def module_sources(package: str) -> dict[str, str]:
    """Every module of PACKAGE (short name -> source), ``__init__`` left out."""
    root = resources.files(package)
    return {
        entry.name.removesuffix(".py"): entry.read_text(encoding="utf-8")
        for entry in sorted(root.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".py") and entry.name != "__init__.py"
    }


@functools.cache  # a package's sources do not change within a process; every render asks
def joined(package: str, entry: str, call: str = "main()") -> str:
    """PACKAGE's modules as one source that runs ENTRY's CALL, its value the exit status."""
    sources = module_sources(package)
    # sorted: the same order in every process (a set's order follows the string hash seed)
    order = graphlib.TopologicalSorter(
        {name: sorted(_imports(package, src) & sources.keys()) for name, src in sources.items()}
    ).static_order()
    parts = [BOOT.format(package=package)]
    prefix = ""
    for level in package.split("."):
        prefix = f"{prefix}.{level}" if prefix else level
        parts.append(f"_register({prefix!r})\n")
    for name in order:
        encoded = base64.b64encode(sources[name].encode()).decode()
        parts.append(f"_register({package + '.' + name!r}, {encoded!r})\n")
    parts.append(
        f"\nif __name__ == '__main__':\n"
        f"    _sys.exit(_sys.modules[{package + '.' + entry!r}].{call})\n"
    )
    return "".join(parts)
