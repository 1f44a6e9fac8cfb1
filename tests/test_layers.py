"""The layer order of the whole package: every module imports only its own layer and those
below it, checked on the source with ``ast`` (function-local imports included).

    isa <- asm <- vm <- kernels <- hostlib.runtime <- hostlib.blas <- hostlib.autodnn <- hostlib.dnn
        <- hostlib.parax <- hostlib.qinglong <- hostlib.graph <- hostlib.train <- hostlib.tools

``errors`` is importable by every layer; the root ``__init__`` and ``cli`` dispatch lazily to
any layer. The bare ``swsim.hostlib`` package (the short public names) counts as the top layer:
inside the host library, import the subpackage itself.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("isa", "asm", "vm", "kernels", "hostlib.runtime", "hostlib.blas", "hostlib.autodnn",
          "hostlib.dnn", "hostlib.parax", "hostlib.qinglong",
          "hostlib.graph", "hostlib.train", "hostlib.tools")
ANYONE_MAY_IMPORT = ("errors",)
DISPATCHERS = ("", "cli")          # swsim/__init__.py, swsim/cli.py
NOT_PACKAGE = ("tests", "docs", "build", "setup", "swsim.egg-info")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(name: str):
    """The rank of a module (dotted name below the package root) in LAYERS, None if none."""
    if name == "hostlib":
        return len(LAYERS) - 1
    ranks = [rank for rank, layer in enumerate(LAYERS)
             if name == layer or name.startswith(layer + ".")]
    return max(ranks, default=None)


def imports(tree: ast.Module, name: str, is_package: bool):
    """(line, imported module below the package root) for every import of the package; for
    ``from X import a`` the target is ``X.a`` (a submodule or a name: its layer is X's)."""
    package = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = ["swsim"] + package[:len(package) - node.level + 1]
            module = base + ([node.module] if node.module else [])
            targets = [".".join(module + [alias.name]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            targets = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target.startswith("swsim."):
                yield node.lineno, target[len("swsim."):]


def violations(root: Path) -> list:
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0].startswith(".") or relative.parts[0] in NOT_PACKAGE \
                or relative.with_suffix("").as_posix() in NOT_PACKAGE:
            continue
        name = module_name(path, root)
        if name in DISPATCHERS or name in ANYONE_MAY_IMPORT:
            continue
        own = layer_of(name)
        assert own is not None, f"{relative} is in no layer: add it to LAYERS"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, target in imports(tree, name, path.name == "__init__.py"):
            if target.split(".")[0] in ANYONE_MAY_IMPORT:
                continue
            rank = layer_of(target)
            if rank is None or rank > own:
                found.append(f"{relative}:{line}: {LAYERS[own]} imports {target} "
                             f"({'no layer' if rank is None else LAYERS[rank]})")
    return found


def test_every_module_imports_only_downward():
    assert violations(ROOT) == []


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_checker_finds_upward_imports(tmp_path):
    write(tmp_path, "__init__.py", "from swsim.hostlib import gemm\n")          # dispatcher
    write(tmp_path, "errors.py", "")
    write(tmp_path, "isa/__init__.py", "from ..errors import SwsimError\n")
    write(tmp_path, "vm/__init__.py", "from ..asm import link\n")
    write(tmp_path, "vm/run.py", "def f():\n    from ..hostlib.blas import gemm\n")
    write(tmp_path, "hostlib/__init__.py", "from .blas import gemm\n")
    write(tmp_path, "hostlib/runtime/k.py", "from swsim.hostlib.tools import cli\n"
                                            "from .. import blas\n")
    write(tmp_path, "hostlib/blas/g.py", "import swsim.hostlib\nfrom ..runtime import k\n")
    assert violations(tmp_path) == [
        "hostlib/blas/g.py:1: hostlib.blas imports hostlib (hostlib.tools)",
        "hostlib/runtime/k.py:1: hostlib.runtime imports hostlib.tools.cli (hostlib.tools)",
        "hostlib/runtime/k.py:2: hostlib.runtime imports hostlib.blas (hostlib.blas)",
        "vm/run.py:2: vm imports hostlib.blas.gemm (hostlib.blas)",
    ]


def test_a_module_outside_every_layer_is_reported(tmp_path):
    write(tmp_path, "extra/x.py", "")
    try:
        violations(tmp_path)
    except AssertionError as exc:
        assert "extra/x.py is in no layer" in str(exc)
    else:
        raise AssertionError("a module in no layer passed")
