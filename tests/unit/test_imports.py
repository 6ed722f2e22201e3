"""The import structure of the product tree (``spark_log``, ``brokers``, ``connectors``,
``jobs``), read with ``ast`` from the sources: every ``import`` counts, including those inside
functions and ``if TYPE_CHECKING:`` blocks (a circle that only a lazy import hides is still a
circle).  Tests and benchmarks are not product code and are not checked.

1. Only the public ``spark_log`` reaches the other packages: ``brokers``, ``connectors`` and
   ``jobs`` never import a private ``spark_log._*`` module or name (the clients' internals);
   they use the shared kernel (``spark_log.errors``, ``config``, ``clock``, ``frame``,
   ``schemas``, ``filters``, ``proto``, ``acls``, ``scram``, ``security``) and the exports of ``spark_log/__init__.py``.
2. The kernel stands apart from the client: a kernel module imports no client module
   (``spark_log._*``, ``spark_log.cli``, the ``spark_log`` package itself).
3. Dependencies point one way, as the table ``MAY_IMPORT`` states (DESIGN.md section 2).
4. No import cycles, neither between files nor between packages (directories).

Adds about 1 s (parsing the ~250 product files once).
"""
from __future__ import annotations

import ast
import functools
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("spark_log", "brokers", "connectors", "jobs")

# Which of the checked names each product package may import (besides itself).  Anything not
# in CHECKED (the standard library, pyarrow, grpc, ...) is free.
#
# | package    | may import                                  | never                               |
# |------------|---------------------------------------------|-------------------------------------|
# | spark_log  | -                                           | brokers, connectors, jobs, pyspark  |
# | brokers    | spark_log                                   | connectors, jobs, pyspark           |
# | connectors | spark_log, pyspark                          | brokers, jobs                       |
# | jobs       | spark_log, brokers, connectors, pyspark     | -                                   |
#
# and no product package imports tests or bench.
CHECKED = frozenset({"spark_log", "brokers", "connectors", "jobs", "pyspark", "tests", "bench"})
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def _doc_table(name: str) -> dict[str, frozenset[str]]:
    """The import table ``name`` of docs/ARCHITECTURE.md (between ``<!-- name -->`` markers):
    rows are importers, a ``yes`` cell allows the column."""
    text = ARCHITECTURE.read_text()
    start, end = text.index(f"<!-- {name} -->"), text.index(f"<!-- /{name} -->")
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text[start:end].splitlines() if line.startswith("|")]
    header, body = rows[0][1:], rows[2:]
    return {row[0]: frozenset(col for col, cell in zip(header, row[1:]) if cell == "yes") for row in body}


# The package table of docs/ARCHITECTURE.md: which product package (and pyspark) each may import.
MAY_IMPORT: dict[str, frozenset[str]] = _doc_table("packages-table")
# Its table for the subpackages of brokers (``node`` is brokers/node.py).
BROKERS_MAY_IMPORT: dict[str, frozenset[str]] = _doc_table("brokers-table")

# The shared kernel: public modules of spark_log that brokers, connectors and jobs build on.
KERNEL = ("spark_log.errors", "spark_log.config", "spark_log.clock", "spark_log.frame", "spark_log.schemas",
          "spark_log.filters", "spark_log.compaction", "spark_log.proto", "spark_log.acls", "spark_log.scram",
          "spark_log.security", "spark_log.tier", "spark_log.fetch_wire", "spark_log.arrays", "spark_log.unfilled")


@dataclass(frozen=True)
class Import:
    """``importer`` (a module of the product) imports ``target`` (a dotted name as written,
    resolved to absolute) at ``line``; ``module`` is the product module it loads, or None
    for a name outside the product."""

    importer: str
    line: int
    target: str
    module: str | None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _sources() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The product module that importing ``name`` loads last: the longest known prefix."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


@functools.cache
def _imports() -> tuple[Import, ...]:
    modules = _sources()
    found: list[Import] = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # ``from a import b``: the module a.b if there is one, else a (b is a name in it)
                targets = [f"{base}.{alias.name}" if alias.name != "*" else base for alias in node.names]
            for target in targets:
                found.append(Import(name, node.lineno, target, _resolve(target, modules)))
    return tuple(found)


def _top(name: str) -> str:
    return name.split(".")[0]


def _package_of(module: str) -> str:
    """The directory a module lives in, as a dotted name (a package's ``__init__`` is in it)."""
    return module if _sources()[module].name == "__init__.py" else module.rpartition(".")[0]


# -- 1. no private spark_log in the other packages -----------------------------------------------


def _is_private_spark_log(target: str) -> bool:
    parts = target.split(".")
    return parts[0] == "spark_log" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])


def test_brokers_connectors_jobs_import_no_private_spark_log() -> None:
    offenders = sorted(f"{i.importer}:{i.line} imports {i.target}" for i in _imports()
                       if _top(i.importer) != "spark_log" and _is_private_spark_log(i.target))
    assert not offenders, "only public spark_log modules outside spark_log:\n" + "\n".join(offenders)


def test_the_check_sees_private_imports() -> None:
    assert _is_private_spark_log("spark_log._client.Cluster")
    assert _is_private_spark_log("spark_log._records")
    assert not _is_private_spark_log("spark_log.schemas.schema_to_bytes")
    assert not _is_private_spark_log("spark_log.__version__")


# -- 2. the kernel stands apart from the client ---------------------------------------------------


def _in_kernel(module: str) -> bool:
    return any(module == k or module.startswith(k + ".") for k in KERNEL)


def test_kernel_modules_exist() -> None:
    missing = [k for k in KERNEL if k not in _sources()]
    assert not missing, f"kernel modules missing: {missing}"


def test_kernel_imports_only_kernel() -> None:
    offenders = sorted(f"{i.importer}:{i.line} imports {i.target}" for i in _imports()
                       if _in_kernel(i.importer) and i.module is not None and not _in_kernel(i.module))
    assert not offenders, "the kernel must not import the client (or anything else of the product):\n" + "\n".join(offenders)


# -- 3. dependency direction ------------------------------------------------------------------------


def test_dependency_table_covers_the_product() -> None:
    assert set(MAY_IMPORT) == set(PRODUCT)
    assert MAY_IMPORT["spark_log"] == frozenset()  # the kernel and client stand alone


def _brokers_part(module: str) -> str:
    """``brokers.server.fetch`` -> ``server``; ``brokers.node`` -> ``node``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_brokers_table_covers_every_subpackage() -> None:
    parts = {_brokers_part(m) for m in _sources() if m.startswith("brokers.")}
    assert parts == set(BROKERS_MAY_IMPORT), f"docs/ARCHITECTURE.md's brokers table names {sorted(BROKERS_MAY_IMPORT)}"


def test_brokers_subpackages_import_as_the_table_says() -> None:
    offenders = sorted(
        f"{i.importer}:{i.line} imports {i.target}" for i in _imports()
        if _top(i.importer) == "brokers" and i.module is not None and _top(i.module) == "brokers"
        and _brokers_part(i.module) not in BROKERS_MAY_IMPORT.get(_brokers_part(i.importer), frozenset())
        | {_brokers_part(i.importer), ""})
    assert not offenders, "imports that docs/ARCHITECTURE.md's brokers table does not allow:\n" + "\n".join(offenders)


@pytest.mark.parametrize("package", PRODUCT)
def test_dependencies_point_one_way(package: str) -> None:
    allowed = MAY_IMPORT[package] | {package}
    offenders = sorted(f"{i.importer}:{i.line} imports {i.target}" for i in _imports()
                       if _top(i.importer) == package and _top(i.target) in CHECKED - allowed)
    assert not offenders, (f"{package} may import only {sorted(MAY_IMPORT[package])} of {sorted(CHECKED - {package})}:\n"
                           + "\n".join(offenders))


# -- 4. no cycles -------------------------------------------------------------------------------------


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def _one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first node, inside the component."""
    start, members = component[0], set(component)
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return list(reversed(path)) + [start]
            if nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"no cycle in component {component}")


def _cycles(graph: dict[str, set[str]], where: dict[tuple[str, str], list[str]]) -> list[str]:
    report = []
    for component in _components(graph):
        if len(component) < 2:
            continue
        cycle = _one_cycle(graph, component)
        steps = [f"    {a} -> {b}  ({', '.join(where[(a, b)][:3])})" for a, b in zip(cycle, cycle[1:])]
        report.append(f"  {len(component)} in a circle: {', '.join(component)}\n  for instance:\n" + "\n".join(steps))
    return report


def _file_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], list[str]]]:
    graph: dict[str, set[str]] = {name: set() for name in _sources()}
    where: dict[tuple[str, str], list[str]] = {}
    for i in _imports():
        if i.module is not None and i.module != i.importer:
            graph[i.importer].add(i.module)
            place = f"{_sources()[i.importer].relative_to(ROOT)}:{i.line}"
            if place not in where.setdefault((i.importer, i.module), []):
                where[(i.importer, i.module)].append(place)
    return graph, where


def _package_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], list[str]]]:
    files, file_where = _file_graph()
    graph: dict[str, set[str]] = {_package_of(m): set() for m in files}
    where: dict[tuple[str, str], list[str]] = {}
    for module, targets in files.items():
        for target in targets:
            a, b = _package_of(module), _package_of(target)
            if a != b:
                graph[a].add(b)
                places = where.setdefault((a, b), [])
                places.extend(p for p in file_where[(module, target)] if p not in places)
    return graph, where


def test_no_import_cycles_between_files() -> None:
    cycles = _cycles(*_file_graph())
    assert not cycles, "import cycles between modules:\n" + "\n".join(cycles)


def test_no_import_cycles_between_packages() -> None:
    cycles = _cycles(*_package_graph())
    assert not cycles, "import cycles between packages (directories):\n" + "\n".join(cycles)


def test_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    where = {(x, y): [f"{x}.py:1"] for x, ys in graph.items() for y in ys}
    (report,) = _cycles(graph, where)
    assert "a, b, c" in report and "a -> b" in report and "c -> a" in report and "d" not in report.split("for")[0]
    assert _cycles({"a": {"b"}, "b": set()}, {("a", "b"): ["a.py:1"]}) == []


def test_graph_sees_lazy_and_type_checking_imports() -> None:
    """The parser counts imports in functions and TYPE_CHECKING blocks (the old
    connectors.filters -> connectors.reader edge, which closed a circle, was one)."""
    edges = {(i.importer, i.module) for i in _imports()}
    assert ("spark_log.cli", "spark_log._admin") in edges  # inside a function
    assert ("connectors.session", "connectors.source") in edges  # inside a function
    assert ("connectors.reader", "spark_log") in edges  # only under TYPE_CHECKING (spark_log.Admin)
