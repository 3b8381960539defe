"""The package's rooms (docs/architecture.md): no import cycle between modules, at most 8 modules
loose at the package root, and servers/ and clients/ side by side (neither imports the other;
what both need is in endpoints/). Read from the source with ast: imports at module level, those
inside a function (deferred on purpose) and under TYPE_CHECKING left out."""

import ast
from pathlib import Path

import quicbench

ROOT = Path(quicbench.__file__).parent
MAX_ROOT_MODULES = 8


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def module_level(nodes):
    """The statements that run when the module is imported."""
    for n in nodes:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            continue
        yield n
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(n, field, None)
            if isinstance(inner, list):
                yield from module_level(inner)


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}

    def known(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for n in module_level(ast.parse(path.read_text()).body):
            if isinstance(n, ast.Import):
                edges |= {known(a.name) for a in n.names if a.name.startswith("quicbench")}
            elif isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    parts = package.split(".")[:len(package.split(".")) - n.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                if base.startswith("quicbench"):
                    edges |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else known(base) for a in n.names}
        graph[name] = edges - {name, ""}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(v: str, stack: list[str]) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if not state.get(w) and (found := visit(w, stack)):
                return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if not state.get(v) and (found := visit(v, [])):
            return found
    return None


def test_find_cycle_finds_one_and_the_graph_is_read():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    graph = import_graph()
    assert "quicbench.servers.command" in graph["quicbench.servers"]
    assert "quicbench.endpoints.command" in graph["quicbench.servers.command"]


def test_no_import_cycle():
    assert find_cycle(import_graph()) is None


def test_at_most_eight_modules_at_the_package_root():
    loose = sorted(p.stem for p in ROOT.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= MAX_ROOT_MODULES, f"{len(loose)} modules at the package root: {loose}"


def test_servers_and_clients_sit_side_by_side():
    graph = import_graph()
    for room, other in (("servers", "clients"), ("clients", "servers")):
        crossing = sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith(f"quicbench.{room}")
                          for t in ts if t.startswith(f"quicbench.{other}"))
        assert not crossing, crossing
