"""The house's shape, read from the source: every import of the package (inside functions and TYPE_CHECKING
blocks too) points down the layers below, no module imports another's `_private` names, and no import
circle exists. The layers, lowest first, are the DESIGN's: leaves (records among them), backends and meaning,
sources, audit and typeset, watch, book, bench (load, then report, then studies), the CLI. No module is over
MAX_MODULE_LINES lines but the tables named in TABLE_MODULES."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pipeline"

# Module name prefix -> layer; the longest prefix that matches a module decides.
LAYERS = {
    "pipeline.errors": 0,
    "pipeline.files": 0,
    "pipeline.text": 0,
    "pipeline.templating": 0,
    "pipeline.journal": 0,
    "pipeline.titles": 0,
    "pipeline.tokens": 0,
    "pipeline.records": 0,
    "pipeline.document": 0,
    "pipeline.cpu": 0,  # where the CPU went, charged by every stage above it
    "pipeline.version": 0,  # the installed fanout's version, read by the CLI and a bench record's host
    "pipeline.config": 1,
    "pipeline.backends": 2,
    "pipeline.meaning": 2,  # the request read, the encoders and judges: below the planner, the writer and the audit
    "pipeline.sources": 3,  # the user's documents read, indexed and searched: below the planner, writer and audit
    "pipeline.audit": 4,
    "pipeline.typeset": 4,
    "pipeline.watch": 5,
    "pipeline.book": 6,
    "pipeline.ask": 6,
    "pipeline.bench": 7,
    "pipeline.bench.load": 7,
    "pipeline.bench.report": 8,
    "pipeline.bench.studies": 9,
    "pipeline.cli": 10,
    "pipeline": 11,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    prefixes = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    return LAYERS[max(prefixes, key=len)]


def imports_of(path: Path, module: str, known: set[str]) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for every import in the file that names a package module."""
    base = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names if alias.name in known]
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                source = ".".join(
                    base.split(".")[: len(base.split(".")) - node.level + 1] + ([source] if source else [])
                )
            names = [alias.name for alias in node.names]
            submodules = [f"{source}.{name}" for name in names if f"{source}.{name}" in known]
            if source in known:
                found.append((source, [n for n in names if f"{source}.{n}" not in known]))
            found += [(sub, []) for sub in submodules]
    return [(target, names) for target, names in found if target != module]


def graph() -> dict[str, list[tuple[str, list[str]]]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {module: imports_of(path, module, set(files)) for module, path in files.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_import_points_down():
    upward = [
        f"{module} -> {target}"
        for module, targets in graph().items()
        for target, _ in targets
        if layer_of(target) > layer_of(module)
    ]
    assert upward == []


def test_no_import_circle():
    edges = {module: {target for target, _ in targets} for module, targets in graph().items()}
    assert circles(edges) == []


def test_no_private_name_crosses_a_module():
    private = [
        f"{module} takes {name} from {target}"
        for module, targets in graph().items()
        for target, names in targets
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert private == []


def test_the_circle_finder_finds_one():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


PLANNER = PACKAGE / "book" / "plan"
MAX_FUNCTION_LINES = 50
MAX_METHODS = 10


def test_the_planner_has_no_long_function_and_no_large_class():
    """A newcomer follows the planner in one pass: no function over MAX_FUNCTION_LINES lines, no class over
    MAX_METHODS methods."""
    found = []
    for path in sorted(PLANNER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (length := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES:
                    found.append(f"{path.name}: {node.name} is {length} lines")
            elif isinstance(node, ast.ClassDef):
                methods = sum(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) for item in node.body)
                if methods > MAX_METHODS:
                    found.append(f"{path.name}: {node.name} has {methods} methods")
    assert not found, found


def test_only_the_policy_names_a_planning_rule():
    """The planner asks the policy's table for a chain's first verdict: no other module of the package names one of
    its rules (the audit's own rules share some names and are left out)."""
    from pipeline.book.plan.policy import RULES

    named = []
    for path in sorted(PLANNER.glob("*.py")):
        if path.name == "policy.py":
            continue
        text = path.read_text(encoding="utf-8")
        named += [f"{path.name}: {rule}" for rule in RULES if f'"{rule}"' in text or f"'{rule}'" in text]
    assert not named, named


MAX_MODULE_LINES = 500
# Modules that are tables, one row a flag or a rule: long because the table is, read a row at a time.
TABLE_MODULES = {"cli/benchflags.py", "book/plan/policy.py"}


def long_modules(package: Path, *, most: int, left_out: set[str]) -> list[str]:
    """Every module of the package over `most` lines, but those left out (paths relative to the package)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        if name not in left_out and (lines := len(path.read_text(encoding="utf-8").splitlines())) > most:
            found.append(f"{name}: {lines} lines")
    return found


def test_no_module_is_over_the_length_but_tables():
    assert {name for name in TABLE_MODULES if not (PACKAGE / name).is_file()} == set()
    assert long_modules(PACKAGE, most=MAX_MODULE_LINES, left_out=TABLE_MODULES) == []


def test_the_length_check_finds_a_long_module(tmp_path):
    (tmp_path / "short.py").write_text("x = 1\n" * 3)
    (tmp_path / "table.py").write_text("x = 1\n" * 9)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "long.py").write_text("x = 1\n" * 5)
    assert long_modules(tmp_path, most=4, left_out={"table.py"}) == ["sub/long.py: 5 lines"]
