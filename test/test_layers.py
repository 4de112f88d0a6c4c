"""The package is laid in layers, and a layer imports only the layers below it; no module import circle exists.

Every ``import`` and ``from ... import`` of every module under pyrua_ros/ counts, at module level and inside
functions alike (an import hidden in a function still ties the two modules together), and module names in strings
that ``importlib`` loads; only the body of ``if TYPE_CHECKING:`` is left out, as it never runs (its ``else:`` does).
Adding a module to a new folder means placing that folder in LAYERS below; moving a shared piece down a layer, not
hiding an import in a function, is how a violation is fixed.
"""

import ast
import functools
import pathlib
import re

import pytest

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "pyrua_ros"

# Lowest first. A module belongs to the longest prefix listed; it may import its own group and groups of a
# lower rank only. Groups of the same rank are siblings and import neither each other.
LAYERS = (
    ("pyrua_ros", "pyrua_ros.sim_interfaces", "pyrua_ros.safety"),  # the version; interface facts; the e-stop
    ("pyrua_ros.wire",),                                              # the ROS vocabulary every side speaks
    ("pyrua_ros.driver", "pyrua_ros.robo", "pyrua_ros.conformance"),  # the driver core; the robot API; the kit
    ("pyrua_ros.sim", "pyrua_ros.fake_arm", "pyrua_ros.examples", "pyrua_ros.settings"),
    ("pyrua_ros.records", "pyrua_ros.bringup"),                       # what a run writes; booting the graph
    ("pyrua_ros.reports", "pyrua_ros.kernel"),                        # reading runs back; the cell kernel
    ("pyrua_ros.agent", "pyrua_ros.agent.prompting"),                 # the prompt
    ("pyrua_ros.agent.runtimes",),                                    # model runtimes behind one seam
    ("pyrua_ros.agent.loop",),                                        # the cell loop, arms, tools
    ("pyrua_ros.agent.run",),                                         # an episode end to end
    ("pyrua_ros.evaluation",),                                        # eval: instances, engines, coordinator
    ("pyrua_ros.cli",),                                               # the subcommands, eval's included
    ("pyrua_ros.nodes",),                                             # the ROS node entry points
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
    """The nodes under ``if TYPE_CHECKING:`` (its body only: an ``else:`` runs)."""
    hidden = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            hidden.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return hidden


MODULE_STRING = re.compile(r"pyrua_ros(\.\w+)+(:\w+)?")


def _imported_strings(tree: ast.AST) -> list[tuple[str, int]]:
    """Module names a file imports by string: in a file that calls ``importlib.import_module`` or ``__import__``,
    every string constant that is a whole dotted pyrua_ros name (``pkg.mod`` or ``pkg.mod:attr``, the form a
    registry table holds), and the literal start of an f-string passed to the call."""
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")]
    if not calls:
        return []
    found = [(node.value.partition(":")[0], node.lineno) for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.fullmatch(node.value)]
    for call in calls:
        first = call.args[0] if call.args else None
        if isinstance(first, ast.JoinedStr) and first.values and isinstance(first.values[0], ast.Constant):
            found.append((str(first.values[0].value).rstrip("."), call.lineno))
    return found


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
    for name, line in _imported_strings(tree):
        target = _resolve(name)
        if target and target != module:
            found.setdefault(target, line)
    return found


def group_of(module: str) -> str:
    """The longest LAYERS prefix that ``module`` falls under. A group that has groups of its own below it (the
    package root, ``agent``, ``cli``) holds only its own files: a folder under it must be placed in LAYERS itself,
    so a new folder never lands silently in its parent's rank."""
    best = max((g for g in RANK if module == g or module.startswith(g + ".")), key=len, default=None)
    assert best is not None, f"{module} is in no layer: place its folder in LAYERS"
    folder = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    assert folder == best or not any(g.startswith(best + ".") for g in RANK), \
        f"{module} is in folder {folder}, which LAYERS does not place (its parent {best} has placed sub-groups)"
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
    assert "pyrua_ros.agent.run.episode" in imports_of("pyrua_ros.agent.run.validate")   # in a function
    assert "pyrua_ros.agent.runtimes.base" in imports_of("pyrua_ros.agent.runtimes")     # `from .base import`
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]
    assert RANK[group_of("pyrua_ros.agent.loop.arms")] > RANK[group_of("pyrua_ros.agent.prompting.prompt")]


def test_the_checks_see_else_branches_import_strings_and_unplaced_folders(monkeypatch):
    """The three ways an import used to pass unseen: the ``else:`` of ``if TYPE_CHECKING`` (it runs), a module name
    in a string that ``importlib`` loads, and a new folder that fell silently into the package root's rank."""
    tree = ast.parse("if TYPE_CHECKING:\n    import a\nelse:\n    import b\n")
    hidden = _type_checking_nodes(tree)
    seen = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) and id(node) not in hidden
            for alias in node.names]
    assert seen == ["b"]
    source = ('import importlib\nTABLE = {"x": ("pyrua_ros.cli.main", "main")}\n'
              'importlib.import_module(f"pyrua_ros.nodes.{n}")\n')
    assert {name for name, _line in _imported_strings(ast.parse(source))} == {"pyrua_ros.cli.main", "pyrua_ros.nodes"}
    assert _imported_strings(ast.parse('DOC = "pyrua_ros.cli.main"\n')) == []   # no import_module: a plain string
    monkeypatch.setitem(MODULES, "pyrua_ros.newfolder.thing", PKG / "newfolder" / "thing.py")
    monkeypatch.setitem(MODULES, "pyrua_ros.agent.newjob", PKG / "agent" / "newjob" / "__init__.py")
    for unplaced in ("pyrua_ros.newfolder.thing", "pyrua_ros.agent.newjob"):
        with pytest.raises(AssertionError, match="LAYERS does not place"):
            group_of(unplaced)


def test_the_layout_table_is_layers():
    """docs/LAYOUT.md's table lists every placed folder at its rank, in LAYERS order, and nothing else."""
    rows = re.findall(r"^\| (\d+) \| `pyrua_ros/([\w/]+?)(/|\.py)` \|", (ROOT / "docs" / "LAYOUT.md").read_text(), re.M)
    table = [(int(rank), "pyrua_ros." + path.replace("/", ".")) for rank, path, _end in rows]
    placed = [(RANK[group], group) for groups in LAYERS for group in groups
              if group not in ("pyrua_ros", "pyrua_ros.agent")]   # the package root and agent/ hold only groups
    assert table == placed
