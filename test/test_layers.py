"""The package is laid in layers, and a layer imports only the layers below it; no module import circle exists.

Every ``import`` and ``from ... import`` of every module under pyrua_ros/ counts, at module level and inside
functions alike (an import hidden in a function still ties the two modules together); only imports under
``if TYPE_CHECKING:`` are left out, as they never run. Adding a module to a new folder means placing that folder in
LAYERS below; moving a shared piece down a layer, not hiding an import in a function, is how a violation is fixed.
"""

import ast
import functools
import pathlib

import pytest

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "pyrua_ros"

# Lowest first. A module belongs to the longest prefix listed; it may import its own group and groups of a
# lower rank only. Groups of the same rank are siblings and import neither each other.
LAYERS = (
    ("pyrua_ros", "pyrua_ros.sim_interfaces", "pyrua_ros.safety"),  # the version; interface facts; the e-stop
    ("pyrua_ros.driver",),                                            # ROS plumbing shared by the drivers
    ("pyrua_ros.robo", "pyrua_ros.sim", "pyrua_ros.fake_arm", "pyrua_ros.conformance"),
    ("pyrua_ros.examples",),                                          # run(robo) programs, their robo errors
    ("pyrua_ros.agent", "pyrua_ros.agent.settings"),                  # the settings schema and modes
    ("pyrua_ros.agent.records", "pyrua_ros.bringup"),                 # what a run writes; booting the graph
    ("pyrua_ros.agent.reports", "pyrua_ros.agent.kernel"),            # reading runs back; the cell kernel
    ("pyrua_ros.agent.prompting",),                                   # the prompt
    ("pyrua_ros.agent.runtimes",),                                    # model runtimes behind one seam
    ("pyrua_ros.agent.loop",),                                        # the cell loop, arms, tools
    ("pyrua_ros.agent.run",),                                         # an episode end to end
    ("pyrua_ros.cli",),                                               # subcommands and what they share
    ("pyrua_ros.evaluation", "pyrua_ros.nodes"),                      # eval; the ROS node entry points
    ("pyrua_ros.cli.main",),                                          # the CLI that dispatches to all of them
    ("pyrua_ros.testing",),                                           # helpers of the tests and benchmarks
)
RANK = {group: rank for rank, groups in enumerate(LAYERS) for group in groups}


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    hidden = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            hidden.update(id(inner) for inner in ast.walk(node))
    return hidden


def _resolve(name: str) -> str | None:
    """The pyrua_ros module that ``name`` (a module, or a name inside one) is, or None outside pyrua_ros."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> dict[str, int]:
    """The pyrua_ros modules ``module`` imports (any depth of the file, TYPE_CHECKING blocks left out) -> a line."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    hidden = _type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names = [f"{base}.{alias.name}" for alias in node.names]   # a submodule, or a name in ``base``
        for name in names:
            target = _resolve(name) if name.startswith("pyrua_ros") else None
            if target and target != module:
                found.setdefault(target, node.lineno)
    return found


def group_of(module: str) -> str:
    """The longest LAYERS prefix that ``module`` falls under."""
    best = max((g for g in RANK if module == g or module.startswith(g + ".")), key=len, default=None)
    assert best is not None, f"{module} is in no layer: place its folder in LAYERS"
    return best


@functools.cache
def graph() -> dict[str, dict[str, int]]:
    """Every module's pyrua_ros imports (parsed on first use, not while pytest collects this file)."""
    return {module: imports_of(module) for module in MODULES}


def test_every_module_is_in_a_layer():
    for module in MODULES:
        group_of(module)


def test_no_layer_imports_one_above_it_or_a_sibling():
    wrong = []
    for module, targets in sorted(graph().items()):
        mine = group_of(module)
        for target, line in sorted(targets.items()):
            theirs = group_of(target)
            if theirs != mine and RANK[theirs] >= RANK[mine]:
                where = "a sibling" if RANK[theirs] == RANK[mine] else "a layer above"
                wrong.append(f"{MODULES[module].relative_to(ROOT)}:{line} imports {target} ({where}: {theirs})")
    assert not wrong, "layer violations:\n" + "\n".join(wrong)


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root, edges in graph.items():
        if root in index:
            continue
        work = [(root, iter(edges))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
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
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_among_pyrua_ros_modules():
    cycles = _cycles(graph())
    assert not cycles, "import circles:\n" + "\n".join(
        " <-> ".join(c) + "\n  " + "\n  ".join(f"{m} -> {sorted(set(graph()[m]) & set(c))}" for m in c) for c in cycles)


def test_the_checks_see_function_level_imports_and_circles():
    """The checks above would catch what they claim: an import inside a function, a relative import, and a
    two-module circle (a check that finds nothing because it looks at nothing would pass as well)."""
    assert "pyrua_ros.agent.records.recorder" in imports_of("pyrua_ros.agent.run.episode")   # in a method
    assert "pyrua_ros.agent.runtimes.base" in imports_of("pyrua_ros.agent.runtimes")     # `from .base import`
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]
    assert RANK[group_of("pyrua_ros.agent.loop.arms")] > RANK[group_of("pyrua_ros.agent.prompting.prompt")]
