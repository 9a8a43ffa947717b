"""The package's shape: no import cycles among module-level imports (the ones that run when a module
loads; imports inside functions are how the CLI stays light and are not cycles)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import imports_of

PKG = Path(__file__).resolve().parent.parent / "memstore"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    deps: set[str] = set()
    for _, mod, names in imports_of(path, package, module_level_only=True):
        deps |= {t for t in [mod, *(f"{mod}.{n}" for n in names)] if t in known and t != name}
    return deps


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    known = _modules()
    graph = {name: _imports(name, path, known) for name, path in known.items()}
    assert len(graph) > 50 and graph["memstore.store"]  # the scan sees the package
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# ----- SQL against the index lives in memstore/index/ ------------------------------------------------

# Modules that may hold SQL: the index owns its schema and every query on it; the benchmarks are
# not product code. The embedding cache (adapters/cache.py) is a database of its own, not the index.
SQL_HOMES = ("memstore/index/", "memstore/bench/")
OWN_DATABASES = {"memstore/adapters/cache.py"}
_SQL = re.compile(
    r"\bSELECT\b.*\bFROM\b|\bINSERT INTO\b|\bUPDATE\b.*\bSET\b|\bDELETE FROM\b|\bCREATE (?:TABLE|INDEX)\b", re.S
)
_EXECUTE = {"execute", "executemany", "executescript"}


def _is_git_execute(rel: str, call: ast.Call) -> bool:
    """memstore/gitrepo.py runs git through GitPython: `Git(cwd).execute([...])`."""
    recv = call.func.value
    return (
        rel == "memstore/gitrepo.py"
        and isinstance(recv, ast.Call)
        and isinstance(recv.func, ast.Name)
        and recv.func.id == "Git"
    )


def sql_offences(rel: str, source: str) -> list[str]:
    """What in one module's source runs SQL or touches a SQLite connection (`rel: line: what`)."""
    out = []
    tree = ast.parse(source)
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}  # judged whole
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _EXECUTE:
            if not _is_git_execute(rel, node):
                out.append(f"{rel}:{line}: calls .{node.func.attr}()")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            out += [f"{rel}:{line}: imports {n}" for n in names if n.split(".")[0] in ("sqlite3", "sqlite_utils")]
        elif isinstance(node, ast.Attribute) and node.attr == "conn":
            out.append(f"{rel}:{line}: uses .conn")
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            if _SQL.search(text):
                out.append(f"{rel}:{line}: SQL in an f-string")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            if _SQL.search(node.value):
                out.append(f"{rel}:{line}: SQL in a string")
    return sorted(out, key=lambda o: (int(o.split(":")[1]), o))


def test_sql_only_in_index():
    offences = []
    scanned = 0
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).as_posix()
        if rel.startswith(SQL_HOMES) or rel in OWN_DATABASES:
            continue
        scanned += 1
        source = path.read_text(encoding="utf-8")
        offences += sql_offences(rel, source)
    assert scanned > 50  # the scan sees the package
    assert offences == [], "SQL and SQLite connections belong in memstore/index/:\n" + "\n".join(offences)


def test_the_sql_finder_finds_sql():
    source = (
        "import sqlite3\n"
        "def f(index, where):\n"
        "    index.conn.execute(f'SELECT rowid FROM records WHERE {where}')\n"
        "    db.executemany('INSERT INTO t VALUES (?)', [])\n"
        "    q = 'DELETE FROM t'\n"
        "    Git('.').execute(['git', 'status'])\n"
    )
    found = sql_offences("memstore/x.py", source)
    assert found == [
        "memstore/x.py:1: imports sqlite3",
        "memstore/x.py:3: SQL in an f-string",
        "memstore/x.py:3: calls .execute()",
        "memstore/x.py:3: uses .conn",
        "memstore/x.py:4: SQL in a string",
        "memstore/x.py:4: calls .executemany()",
        "memstore/x.py:5: SQL in a string",
        "memstore/x.py:6: calls .execute()",  # Git(...).execute is allowed in gitrepo.py only
    ]
    assert sql_offences("memstore/gitrepo.py", "Git('.').execute(['git', 'status'])\n") == []
