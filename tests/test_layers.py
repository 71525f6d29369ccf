"""The package's layers (docs/architecture.md), checked on its source: the engine knows nothing of the
layers above it, only the storage backends touch files, and every engine module imports on its own
(an import cycle hidden by a local import breaks that for one of its modules)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "pysparklog"
STORAGE = PACKAGE / "storage"
#: What the engine must not import: the clients, the Spark adapter and the CLI.
ABOVE_THE_ENGINE = (
    "pysparklog.consumer",
    "pysparklog.producer",
    "pysparklog.group",
    "pysparklog.offsets",
    "pysparklog.transactions",
    "pysparklog.partitioner",
    "pysparklog.assignors",
    "pysparklog.spark",
    "pysparklog.datasource_v2",
    "pysparklog.cli",
)
#: Calls that reach files directly; only the storage backends (``storage/io``) make them on log-directory files.
FILE_CALLS = {
    ("os", "open"),
    ("os", "pwrite"),
    ("os", "pread"),
    ("os", "replace"),
    ("os", "rename"),
    ("os", "remove"),
    ("os", "unlink"),
    ("os", "listdir"),
    ("os", "scandir"),
    ("os", "stat"),
    ("os", "fsync"),
    ("os", "makedirs"),
    ("os", "mkdir"),
    ("os", "truncate"),
    ("os", "ftruncate"),
    ("os", "utime"),
    ("shutil", "rmtree"),
    ("fcntl", "flock"),
}
#: The few places that open a file that is not in a log directory, and why.
NOT_LOG_DIRECTORY_FILES = {
    "storage/log_state.py": "the kernel's boot id",
    "cli/main.py": "/dev/null for a closed stdout",
    "cli/configs.py": "the properties file the user names",
    "cli/delete_records.py": "the JSON file the user names",
    "cli/dump_log.py": "the files the user names",
    "datasource_v2.py": "Spark's checkpoint metadata",
    "endpoint/security.py": "the SASL users file and TLS certificates the operator names",
}


def _modules(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _imported(tree: ast.AST) -> set[str]:
    """The modules a module imports when it runs (``if TYPE_CHECKING:`` blocks left out); ``from package
    import name`` counts as ``package.name`` too, which is the module imported when ``name`` is one."""
    names: set[str] = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)  # the body is for the type checker only
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        todo.extend(ast.iter_child_nodes(node))
    return names


def _file_calls(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append(f"open() at line {node.lineno}")
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if (func.value.id, func.attr) in FILE_CALLS:
                found.append(f"{func.value.id}.{func.attr}() at line {node.lineno}")
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute):
            inner = func.value
            if isinstance(inner.value, ast.Name) and (inner.value.id, inner.attr) == ("os", "path"):
                if func.attr in ("exists", "isdir", "isfile", "getsize", "getmtime", "getctime"):
                    found.append(f"os.path.{func.attr}() at line {node.lineno}")
    return found


@pytest.mark.parametrize("path", _modules(STORAGE), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_engine_imports_nothing_above_it(path: Path) -> None:
    above = sorted(name for name in _imported(ast.parse(path.read_text())) if name.startswith(ABOVE_THE_ENGINE))
    assert not above, f"{path.relative_to(REPO)} imports {above}: the engine knows nothing of the layers above it"


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_storage_backends_touch_files(path: Path) -> None:
    relative = path.relative_to(PACKAGE).as_posix()
    if relative.startswith("storage/io/") or relative in NOT_LOG_DIRECTORY_FILES:
        return
    calls = _file_calls(ast.parse(path.read_text()))
    assert not calls, f"pysparklog/{relative} reaches files itself ({', '.join(calls)}): go through a Storage"


def test_the_exceptions_are_still_needed() -> None:
    """An entry of ``NOT_LOG_DIRECTORY_FILES`` whose module no longer opens a file must go."""
    stale = [name for name in NOT_LOG_DIRECTORY_FILES if not _file_calls(ast.parse((PACKAGE / name).read_text()))]
    assert not stale


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def _import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_engine_has_no_import_cycle() -> None:
    """Imports inside functions count too: a cycle they hide still ties the modules together."""
    engine = {_module_name(path): path for path in _modules(STORAGE)}
    graph = {
        name: {
            imported for imported in _imported(ast.parse(path.read_text())) if imported in engine and imported != name
        }
        for name, path in engine.items()
    }
    assert _import_cycle(graph) is None, f"import cycle: {' -> '.join(_import_cycle(graph) or [])}"


def test_an_import_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _import_cycle(graph) == ["a", "b", "c", "a"]
    assert _import_cycle({"a": {"b"}, "b": set()}) is None
