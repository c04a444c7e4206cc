"""The layers of docs/architecture.md, checked on the source: who may import whom, no cycles, and no
branch on a product's name outside the registry."""

from __future__ import annotations

import ast
import json
import re
from collections import defaultdict

from tests.helpers import REPO

PACKAGE = REPO / "orchestrator"

# The engine's own package may use only these (besides the standard library and its dependencies).
ENGINE_MAY_IMPORT = {"restart", "pending", "config", "hosts", "errors", "retry", "paths", "units", "reading"}


def unit_of(module: str) -> str:
    """orchestrator.shards.adapter -> es; orchestrator.errors -> errors."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports() -> dict[str, set[tuple[str, str]]]:
    """unit -> {(imported unit, file)}, from every import in the source, in functions too."""
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if (name.startswith("orchestrator.") and (PACKAGE / name.split(".")[1]).exists()) or \
                        (name.startswith("orchestrator.") and (PACKAGE / f"{name.split('.')[1]}.py").exists()):
                    target = unit_of(name)
                    if target != unit_of(module):
                        found[unit_of(module)].add((target, str(path.relative_to(REPO))))
    return found


def test_the_engine_imports_no_product_and_no_application_code() -> None:
    wrong = sorted((target, where) for target, where in imports()["restart"] if target not in ENGINE_MAY_IMPORT)
    assert wrong == [], f"restart/ may import only {sorted(ENGINE_MAY_IMPORT)}: {wrong}"


def test_no_import_cycle_between_units() -> None:
    graph = {unit: {target for target, _ in targets} for unit, targets in imports().items()}
    cycles = []

    def visit(unit: str, path: list[str]) -> None:
        for target in sorted(graph.get(unit, ())):
            if target in path:
                cycles.append(" -> ".join([*path[path.index(target):], target]))
            else:
                visit(target, [*path, target])

    for unit in sorted(graph):
        visit(unit, [unit])
    assert cycles == [], f"import cycles: {sorted(set(cycles))[:5]}"


def test_production_code_never_imports_the_sandbox_or_the_tests() -> None:
    wrong = sorted((unit, where) for unit, targets in imports().items() if unit not in ("sandbox", "cli")
                   for target, where in targets if target == "sandbox")
    assert wrong == [], wrong
    for path in PACKAGE.rglob("*.py"):
        assert "from tests" not in path.read_text() and "import tests" not in path.read_text(), path


def test_no_branch_on_a_product_name_outside_the_registry() -> None:
    """The sandbox builds product test clusters by design and is left out; everything else asks the plug-in."""
    literal = re.compile(r"""product["')\]]*\s*[!=]=\s*["']""")
    found = [f"{p.relative_to(REPO)}:{n}" for p in PACKAGE.rglob("*.py")
             if "sandbox" not in p.parts and p.name not in ("products.py", "sandbox_cmd.py")
             for n, line in enumerate(p.read_text().splitlines(), start=1) if literal.search(line)]
    assert found == [], found


def test_the_shared_shard_model_knows_neither_client_and_the_plug_ins_not_each_other() -> None:
    """shards/ is Elasticsearch's and OpenSearch's one implementation: it must not lean on either one's
    client or package, and neither plug-in on the other's."""
    graph = imports()
    assert {t for t, _ in graph["shards"]} & {"es", "opensearch"} == set(), graph["shards"]
    assert "opensearch" not in {t for t, _ in graph["es"]} and "es" not in {t for t, _ in graph["opensearch"]}
    for path in (PACKAGE / "shards").rglob("*.py"):
        tree = ast.parse(path.read_text())
        clients = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names] + \
            [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [c for c in clients if c.split(".")[0] in ("elasticsearch", "elastic_transport", "opensearchpy")], \
            path


def test_no_config_pattern_counts_a_long_repetition() -> None:
    """Pydantic-core compiles each field's pattern when the models are built, at every command's start;
    `[^\\x00\\n\\r]{0,4000}` made it build an automaton of every Unicode character (80-400 ms a field).
    A length is a max_length; every pattern of the packaged models is checked here."""
    from pydantic import BaseModel

    import orchestrator.config.model  # builds the inventory's models and those it uses
    import orchestrator.tuning.profile  # noqa: F401

    def subclasses(cls: type) -> list[type]:
        return [c for sub in cls.__subclasses__() for c in (sub, *subclasses(sub))]

    patterns = {m.__name__: re.findall(r'"pattern": "((?:[^"\\]|\\.)*)"', json.dumps(m.model_json_schema()))
                for m in subclasses(BaseModel) if m.__module__.startswith("orchestrator.config")
                or m.__module__.startswith("orchestrator.tuning")}
    assert sum(map(len, patterns.values())) > 10, patterns  # the walk finds the models' patterns
    long = {name: p for name, found in patterns.items() for p in found
            if any(int(n) > 300 for n in re.findall(r"\{\d*,?(\d+)\}", p))}
    assert long == {}


def test_the_plug_in_boundary_is_typed_not_checked_at_run_time() -> None:
    """Each plug-in's PRODUCT is declared as a `Product[ItsSnapshot, ItsAdapter]`, so mypy checks it against
    the interface, and no decision or step asserts the type of the adapter or snapshot it was given. The one
    run-time check left is of the operator's input: a force-merge asked of a cluster of another product."""
    from orchestrator import products

    for name, module in products.PLUGINS.items():
        path = REPO / (module.replace(".", "/") + ".py")
        declared = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.AnnAssign)
                    and isinstance(n.target, ast.Name) and n.target.id == "PRODUCT"]
        assert declared and ast.unparse(declared[0].annotation).startswith("Product["), (name, path)
    checked = re.compile(r"isinstance\([^)]*(Adapter|Snapshot|ClusterAdapter)\b")
    found = [f"{p.relative_to(REPO)}: {line.strip()}" for p in PACKAGE.rglob("*.py") if "sandbox" not in p.parts
             for line in p.read_text().splitlines() if "assert isinstance" in line or checked.search(line)]
    assert found == ["orchestrator/forcemerge/cluster.py: if not isinstance(cluster, ShardClusterAdapter):"], found


def module_imports() -> dict[str, set[str]]:
    """module -> the package's modules it imports (in functions too), each a module of the package."""
    modules = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
               for p in PACKAGE.rglob("*.py")}
    found: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                         for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            found[module] |= {n for n in names if n in modules and n != module}
    return found


def test_no_import_cycle_between_the_modules_of_one_package() -> None:
    """Inside a unit too (the Airflow provider's operators and trigger reached each other): a module that
    imports, even in a function, one that imports it back cannot be read or changed alone."""
    graph = module_imports()
    cycles = set()

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(graph.get(module, ())):
            if unit_of(target) != unit_of(module) or target in (f"orchestrator.{unit_of(module)}", "orchestrator"):
                continue  # between units: the test above; a package's own __init__ re-exports
            if target in path:
                cycle = path[path.index(target):]
                first = cycle.index(min(cycle))
                cycles.add(" -> ".join([*cycle[first:], *cycle[:first], min(cycle)]))
            elif len(path) < 12:
                visit(target, [*path, target])

    for module in sorted(graph):
        visit(module, [module])
    assert sorted(cycles) == [], f"import cycles inside a package: {sorted(cycles)[:8]}"
