"""What policy code may do inside the kernel: the Python-level layer of the sandbox (PYRUALEAN-CONTRACT.md section 5).

This layer gives clear, early answers (a refused cell, an ``ImportError`` that lists what is available, a
``PermissionError`` for a path outside the workspace). It is not the boundary: in-process Python cannot be sealed.
The boundary is the kernel process itself (``worker.py``): it holds no ROS handle and no robo object, runs under
resource limits, with no capabilities, no new processes and, where the Linux kernel offers Landlock, write access
to its workspace only. Pure Python; imported by the agent process (static checks) and by the child (guards).

Modules the reference allows are served with the members that would route around the guards below taken out:
- ``traceback`` without ``walk_stack`` / ``walk_tb`` (they hand out live frames, whose ``f_globals`` are the
  kernel's own module globals); ``format_exc``, ``print_exc`` and the summaries work as usual.
- ``operator`` with ``attrgetter`` / ``methodcaller`` refusing private and blocked names (they read attributes by
  runtime string, past the guarded ``getattr``).
- ``io`` is served with ``open`` replaced by the guarded one and ``FileIO`` / ``open_code`` hidden.
- every module is served as a read-only view: private members (``random._os``) and members that are modules
  outside this list (``warnings.sys``, ``dataclasses.sys``) are hidden; numpy/cv2 file functions check paths.
Extra blocked names (beyond the reference's list): frame, generator and traceback internals (``f_globals``,
``gi_frame``, ``tb_frame``, ``_getframe`` ...) and ``__getattribute__``, which are the known routes from plain
objects to the kernel's globals.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import os
import re
import string
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ALLOWED_MODULES: tuple[str, ...] = (
    "__future__", "abc", "array", "bisect", "cmath", "collections", "contextlib", "copy", "cv2", "dataclasses",
    "datetime", "decimal", "enum", "fractions", "functools", "heapq", "io", "itertools", "json", "math",
    "numbers", "numpy", "operator", "PIL", "pprint", "random", "re", "scipy", "skimage", "statistics", "string",
    "struct", "textwrap", "time", "traceback", "types", "typing", "warnings",
)

# The names a cell finds defined before its first line (the kernel's namespace; the prompt and the tool
# description name them from here).
PREDEFINED_NAMES: tuple[str, ...] = ("robo", "np", "numpy", "math", "time", "log", "display")

REMOVED_BUILTINS: tuple[str, ...] = (
    "exec", "eval", "compile", "__import__", "open", "breakpoint", "input", "help", "exit", "quit",
)

REFERENCE_BLOCKED_NAMES: tuple[str, ...] = (
    "__builtins__", "__closure__", "__code__", "__func__", "__globals__", "__import__", "__loader__", "__self__",
    "__spec__", "__subclasses__", "__wrapped__",
)
FRAME_NAMES: tuple[str, ...] = (
    "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "gi_frame", "gi_code", "cr_frame", "cr_code",
    "ag_frame", "ag_code", "tb_frame", "tb_next", "_getframe", "__getattribute__",
)
BLOCKED_NAMES: tuple[str, ...] = REFERENCE_BLOCKED_NAMES + FRAME_NAMES

ESCAPE_NAMES = frozenset((
    "eval", "exec", "compile", "__import__", "globals", "__builtins__", "__subclasses__", "__class__", "__bases__",
    "__mro__", "__globals__", "__closure__", "__code__", "__dict__", "__loader__", "__spec__", "__func__",
    "__self__", "__wrapped__",
))
ESCAPE_FLAGGED = ESCAPE_NAMES | frozenset(BLOCKED_NAMES)   # the audit's escape:<name> (ours add frame internals)
PROBE_NAMES = frozenset(("getattr", "setattr", "delattr", "vars", "locals", "dir"))
HOST_ATTRS = frozenset(("backend", "ledger", "toolkit", "primitives"))
MAX_FLAGS = 40

VALUE_CHARS = 4000      # repr of a trailing expression: its first and last 2000 chars are kept (the reference's)
TRACEBACK_CHARS = 4000  # a traceback likewise
STREAM_HEAD = 4000      # stdout/stderr: first 4000 ...
STREAM_TAIL = 4000      # ... and last 4000 chars

# A blocked name read as an attribute by a replacement field of a constant format string (``"{0.__globals__}"``):
# ``str.format`` looks attributes up in C, past the guarded ``getattr``.
_FIELD_ATTR_RE = re.compile(r"\.\s*(" + "|".join(map(re.escape, BLOCKED_NAMES)) + r")(?![A-Za-z0-9_])")


class SandboxError(Exception):
    """Policy code used something the sandbox does not allow (raised inside the kernel, reported as text)."""


class UncheckableSource(SandboxError):
    """Source the static checks cannot parse without running out of stack or memory (``1+1+...+1`` with thousands
    of terms, thousands of nested brackets): it is refused, never run unchecked, and never raises further."""


def _parse(source: str) -> ast.AST | None:
    """The syntax tree of ``source``; None for source that is not valid Python (the SyntaxError is reported when
    it runs); raises :class:`UncheckableSource` for source too deep or too large to parse here."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError) as exc:
        raise UncheckableSource(
            f"SyntaxError: the code is nested too deeply or is too large to be checked ({type(exc).__name__} "
            f"while parsing it) and was not run; split long expressions and deep nesting into smaller "
            f"statements") from None


def refusal_text(names: Iterable[str], what: str = "cell") -> str:
    """The contract's refusal for code that names a blocked name; ``what`` is ``cell`` or ``program``."""
    return (f"SandboxError: {', '.join(names)} may not be used by policy code; the {what} was not run.  "
            f"Stay within the documented `robo` API.")


def blocked_names(source: str) -> list[str]:
    """Blocked names the source uses (unique, in the order ``ast.walk`` meets them, as the reference lists them):
    as a bare name, an attribute, an import, a keyword, a whole
    string constant (the reference's rule: ``getattr(f, "__globals__")``), or an attribute a constant format string
    reads (``"{0.__globals__}".format(f)``). A string that only mentions a name (``print("no __globals__ here")``)
    is not a use and is not refused. Unparsable source returns [] (the SyntaxError is reported when the cell runs);
    source too deep to parse raises :class:`UncheckableSource`."""
    tree = _parse(source)
    if tree is None:
        return []
    found: dict[str, None] = {}   # insertion-ordered set
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in BLOCKED_NAMES:
            found[node.id] = None
        elif isinstance(node, ast.Attribute) and node.attr in BLOCKED_NAMES:
            found[node.attr] = None
        elif isinstance(node, ast.alias):
            found.update(dict.fromkeys(part for part in node.name.split(".") if part in BLOCKED_NAMES))
        elif isinstance(node, ast.keyword) and node.arg in BLOCKED_NAMES:
            found[node.arg] = None
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in BLOCKED_NAMES:
                found[node.value] = None
            elif "{" in node.value:
                found.update(dict.fromkeys(sorted(_format_field_attributes(node.value))))
    return list(found)


def syntax_error(source: str, filename: str) -> str | None:
    """``"SyntaxError: <what Python says>"`` when ``source`` does not parse (the reference's cell text), else None."""
    try:
        ast.parse(source, filename)
    except SyntaxError as exc:
        return f"SyntaxError: {exc}"
    except ValueError:   # e.g. a null byte on an older Python: the kernel reports what compile() says
        return None
    return None


def _format_field_attributes(text: str, depth: int = 0) -> set[str]:
    """Blocked names the replacement fields of ``text``, used as a format string, would read as attributes
    (nested fields in format specs included). Text that is not a valid format string, or nests fields deeper than
    ``str.format`` itself allows, is scanned whole."""
    found: set[str] = set()
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return set(_FIELD_ATTR_RE.findall(text))
    for _literal, field, spec, _conversion in fields:
        if field:
            found.update(_FIELD_ATTR_RE.findall(field))
        if spec and "{" in spec:
            found.update(_format_field_attributes(spec, depth + 1) if depth < 4 else _FIELD_ATTR_RE.findall(spec))
    return found


def audit_source(source: str, workspace: Path | None = None) -> list[str]:
    """Informational flags (contract section 5): ``import:``, ``host-attr:``, ``private-attr:``, ``escape:``
    (an escape or blocked name as a bare name, an attribute or a whole string constant, the last for
    ``getattr(obj, "__globals__")``), ``probe:``, ``path:``; de-duplicated, in source order, at most 40.
    Unparsable source returns []; source too deep to parse raises :class:`UncheckableSource`."""
    tree = _parse(source)
    if tree is None:
        return []
    flags: list[str] = []

    def add(flag: str) -> None:
        if flag not in flags and len(flags) < MAX_FLAGS:
            flags.append(flag)

    nodes = sorted((n for n in ast.walk(tree) if hasattr(n, "lineno")), key=lambda n: (n.lineno, n.col_offset))
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top and top not in ALLOWED_MODULES and not workspace_module_exists(workspace, top):
                    add(f"import:{top}")
        elif isinstance(node, ast.Attribute):
            attr = node.attr
            if attr.lstrip("_") in HOST_ATTRS:
                add(f"host-attr:{attr.lstrip('_')}")
            if attr in ESCAPE_FLAGGED:
                add(f"escape:{attr}")
            elif attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__")):
                add(f"private-attr:{attr}")
        elif isinstance(node, ast.Name):
            if node.id in ESCAPE_FLAGGED:
                add(f"escape:{node.id}")
            elif node.id in PROBE_NAMES:
                add(f"probe:{node.id}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text in ESCAPE_FLAGGED:   # getattr(obj, "__globals__"): the reference flags the string too
                add(f"escape:{text}")
            if text.startswith(("/", "~")) or ".." in Path(text).parts or "states.json" in text:
                add(f"path:{text[:60]}")
    return flags


def workspace_module_exists(workspace: Path | None, name: str) -> bool:
    """True if ``workspace/<name>.py`` or ``workspace/<name>/__init__.py`` exists."""
    if workspace is None or not name.isidentifier():
        return False
    return (workspace / f"{name}.py").is_file() or (workspace / name / "__init__.py").is_file()


def omission(n: int) -> str:
    """The marker between the kept head and tail of a cut text, on a line of its own (as the reference writes it)."""
    return f"\n... [{n} chars omitted] ...\n"


def trim_middle(text: str, head: int = STREAM_HEAD, tail: int = STREAM_TAIL) -> str:
    """``text`` if short enough, else its first ``head`` and last ``tail`` chars around an omission marker."""
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}{omission(len(text) - head - tail)}{text[-tail:]}"


def confine_path(root: str, path: Any) -> str:
    """The real path of ``path`` (relative paths start at ``root``) if it lies inside ``root``; raises
    ``PermissionError`` for file descriptors and for anything outside (symlinks are resolved first)."""
    if isinstance(path, int) or not isinstance(path, str | bytes | os.PathLike):
        raise PermissionError(f"policy code may only open files by path inside its workspace ({root}); "
                              f"got {type(path).__name__} {path!r} (file descriptors are not allowed)")
    text = os.fsdecode(os.fspath(path))
    real = os.path.realpath(os.path.join(root, os.path.expanduser(text) if text.startswith("~") else text))
    if real != root and not real.startswith(root + os.sep):
        raise PermissionError(f"policy code may only open files inside its workspace ({root}); got {text!r}")
    return real


def guarded_open(root: str) -> Callable[..., Any]:
    """``open`` confined to ``root``: same signature as the builtin, no ``opener``, no fds."""
    real_open = builtins.open

    def open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True, opener=None):  # noqa: PLR0917
        """Open a file inside the workspace (relative paths start there). Same arguments as the builtin open."""
        if opener is not None:
            raise PermissionError("policy code may not pass an opener to open()")
        return real_open(confine_path(root, file), mode, buffering, encoding, errors, newline, closefd)

    return open


def _path_checked(root: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a library function whose first argument may be a file path so that the path must be in ``root``."""

    @functools.wraps(fn)
    def checked(first, *args, **kwargs):
        if isinstance(first, str | bytes | os.PathLike):
            first = confine_path(root, first)
        elif isinstance(first, int):
            confine_path(root, first)
        return fn(first, *args, **kwargs)

    return checked


def _named_access(factory: Callable[..., Any]) -> Callable[..., Any]:
    """``operator.attrgetter`` / ``methodcaller`` refusing names the guarded ``getattr`` refuses (private ones)."""

    @functools.wraps(factory)
    def guarded(*names: Any, **kwargs: Any) -> Any:
        checked = names if factory.__name__ == "attrgetter" else names[:1]
        for name in checked:
            for part in str(name).split("."):
                if part.startswith("_"):
                    raise AttributeError(f"SandboxError: {factory.__name__}({name!r}) reaches a private attribute, "
                                         "which policy code may not use")
        return factory(*names, **kwargs)

    return guarded


_SAFE_DUNDERS = frozenset(("__name__", "__doc__", "__version__", "__all__", "__file__", "__path__", "__package__"))
_FILE_FUNCTIONS = {
    "numpy": ("load", "save", "savez", "savez_compressed", "loadtxt", "savetxt", "genfromtxt", "fromfile",
              "memmap", "fromregex"),
    "cv2": ("imread", "imwrite", "imreadmulti", "VideoCapture", "VideoWriter"),
}


class ModuleViews:
    """Read-only views of allowed modules, one per module name, made for one workspace ``root``."""

    def __init__(self, root: str, allowed: Iterable[str] = ALLOWED_MODULES) -> None:
        self.root = root
        self.allowed = frozenset(allowed)
        self._views: dict[str, types.ModuleType] = {}

    def allows(self, module_name: str) -> bool:
        return module_name.partition(".")[0] in self.allowed

    def lazy(self, name: str) -> types.ModuleType:
        """A stand-in for the view of the allowed module ``name`` that imports it on first use (numpy takes
        about 0.3 s to import: a kernel that does not use it starts without paying that)."""

        stand_in = types.ModuleType(name, f"{name} (imported on first use)")
        views = self

        def real() -> types.ModuleType:
            return views.view(importlib.import_module(name))

        def __getattr__(attr: str) -> Any:
            if attr.startswith("_") and attr not in _SAFE_DUNDERS:
                raise AttributeError(f"module {name!r} has no public attribute {attr!r} "
                                     f"(private module members are hidden from policy code)")
            return getattr(real(), attr)

        stand_in.__getattr__ = __getattr__
        stand_in.__dir__ = lambda: dir(real())
        return stand_in

    def view(self, module: types.ModuleType) -> types.ModuleType:
        """The view of ``module`` (made once): public members only, modules outside the allow-list hidden."""
        name = module.__name__
        if name in self._views:
            return self._views[name]
        view = types.ModuleType(name, getattr(module, "__doc__", None))
        overrides: dict[str, Any] = {}
        if name == "io":
            overrides = {"open": guarded_open(self.root), "FileIO": None, "open_code": None}
        elif name == "traceback":
            overrides = {"walk_stack": None, "walk_tb": None}
        elif name == "operator":
            overrides = {"attrgetter": _named_access(module.attrgetter), "methodcaller": _named_access(
                module.methodcaller)}
        for fn_name in _FILE_FUNCTIONS.get(name, ()):
            if hasattr(module, fn_name):
                overrides[fn_name] = _path_checked(self.root, getattr(module, fn_name))
        views = self

        def __getattr__(attr: str) -> Any:
            if attr in overrides and overrides[attr] is None:
                raise AttributeError(f"module {name!r} member {attr!r} is not available to policy code")
            if attr.startswith("_") and attr not in _SAFE_DUNDERS:
                raise AttributeError(f"module {name!r} has no public attribute {attr!r} "
                                     f"(private module members are hidden from policy code)")
            value = getattr(module, attr)
            if isinstance(value, types.ModuleType):
                if not views.allows(value.__name__):
                    raise AttributeError(f"module {name!r} member {attr!r} is the module {value.__name__!r}, "
                                         f"which policy code may not use")
                value = views.view(value)
            setattr(view, attr, value)
            return value

        def __dir__() -> list[str]:
            return sorted(a for a in dir(module) if not a.startswith("_"))

        view.__getattr__ = __getattr__
        view.__dir__ = __dir__
        for attr, value in overrides.items():
            if value is not None:
                setattr(view, attr, value)
        self._views[name] = view
        return view


def guard_attribute_name(name: Any) -> None:
    """Raise ``AttributeError`` if a runtime attribute name is one of the blocked names."""
    if isinstance(name, str) and name in BLOCKED_NAMES:
        raise AttributeError(f"SandboxError: attribute {name!r} may not be used by policy code")


def sandbox_builtins(root: str, importer: Callable[..., Any]) -> dict[str, Any]:
    """The ``__builtins__`` dict of policy code: the real builtins minus ``REMOVED_BUILTINS``, with the guarded
    ``__import__`` (``importer``) and ``open``, and ``getattr``/``setattr``/``delattr``/``hasattr`` that refuse
    the blocked names given as runtime strings."""
    table = {k: v for k, v in vars(builtins).items() if k not in REMOVED_BUILTINS}
    real_getattr, real_setattr, real_delattr, real_hasattr = (builtins.getattr, builtins.setattr, builtins.delattr,
                                                              builtins.hasattr)
    missing = object()

    def getattr(obj, name, default=missing):
        """getattr(object, name[, default]); blocked names are refused."""
        guard_attribute_name(name)
        return real_getattr(obj, name) if default is missing else real_getattr(obj, name, default)

    def setattr(obj, name, value):
        """setattr(object, name, value); blocked names are refused."""
        guard_attribute_name(name)
        real_setattr(obj, name, value)

    def delattr(obj, name):
        """delattr(object, name); blocked names are refused."""
        guard_attribute_name(name)
        real_delattr(obj, name)

    def hasattr(obj, name):
        """hasattr(object, name); blocked names are refused."""
        guard_attribute_name(name)
        return real_hasattr(obj, name)

    table.update(__import__=importer, open=guarded_open(root), getattr=getattr, setattr=setattr,
                 delattr=delattr, hasattr=hasattr)
    return table


def import_refusal(name: str) -> ImportError:
    """The contract's ImportError for a module outside the allow-list."""
    return ImportError(f"module {name!r} is not available inside the policy sandbox; available: "
                       f"{', '.join(ALLOWED_MODULES)}, and .py files in your workspace")
