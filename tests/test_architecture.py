"""The package's frame (docs/architecture.md): faces on top, the facade (`Store`), features, the core
and the ground below, with no import circle and no arrow running back up — counting every import,
the ones inside functions too (they tie modules together as surely as module-level ones; only
the root package `memstore/__init__.py` is left out, since every module reads its version)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from conftest import imports_of

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "memstore"

# The floors, top down (module-name prefixes). Ground is everything not named here.
FACES = (
    "memstore.cli",
    "memstore.serve",
    "memstore.integrations",
    "memstore.bench",
    "memstore.__main__",
)
FACADE = ("memstore.store",)
FEATURES = (
    "memstore.ingest",
    "memstore.tree",
    "memstore.retrieve",
    "memstore.upkeep",
    "memstore.forget",
)
CORE = ("memstore.core",)


def floor(module: str) -> int:
    """4 faces, 3 facade, 2 features, 1 core, 0 ground."""
    for n, prefixes in ((4, FACES), (3, FACADE), (2, FEATURES), (1, CORE)):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return n
    return 0


def modules(pkg: Path = PKG) -> dict[str, Path]:
    out = {}
    for p in pkg.rglob("*.py"):
        parts = p.relative_to(pkg.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def import_graph(pkg: Path = PKG) -> dict[str, dict[str, int]]:
    """module -> {module it imports: the first line that does}, every import statement counted
    (function-level ones too); `from a import b` names a.b when b is a module. The root package
    (its version) is no edge."""
    known = modules(pkg)
    root = pkg.name
    graph: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        if name == root:
            continue  # the root package: the version every module reads, and the lazy `Store`
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: dict[str, int] = {}
        for line, mod, names in imports_of(path, package):
            targets = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in known] or [mod]
            for t in targets:
                if t in known and t not in (name, root):
                    deps.setdefault(t, line)
        graph[name] = deps
    return graph


def cycles(graph) -> list[list[str]]:
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


def test_no_import_circle_counting_every_import():
    graph = import_graph()
    assert len(graph) > 80 and graph["memstore.store"]  # the scan sees the package
    inside = sum(len(d) for d in graph.values())
    assert inside > 400, inside  # function-level imports are counted (most of the package's are)
    assert cycles(graph) == []


def test_no_circle_between_folders_either():
    """Read a folder as one room (forget/, retrieve/, …): the rooms import each other in no circle."""

    def room(m: str) -> str:
        parts = m.split(".")
        return parts[1] if len(parts) > 2 or (PKG / parts[-1]).is_dir() else m

    rooms: dict[str, dict[str, int]] = {}
    for m, deps in import_graph().items():
        mine = rooms.setdefault(room(m), {})
        for t, line in deps.items():
            if room(t) != room(m):
                mine.setdefault(room(t), line)
                rooms.setdefault(room(t), {})
    assert "forget" in rooms and "retrieve" in rooms["memstore.store"]  # the scan sees the folders
    assert cycles(rooms) == []


def test_the_circle_check_fails_on_a_circle_made_by_a_lazy_import(tmp_path):
    """A circle closed only by an import inside a function is found (the check that once read
    module-level imports alone passed a 17-file circle)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .c import g\n    return g\n")
    (pkg / "c.py").write_text("def g():\n    from pkg import a\n    return a\n")
    (pkg / "d.py").write_text("from .a import b\n")
    assert cycles(import_graph(pkg)) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_no_arrow_runs_back_up():
    """Features take a Core and never import the facade; core and ground never import the facade
    or a feature; nothing below the faces imports a face."""
    up = [
        f"{m} (floor {floor(m)}) imports {t} (floor {floor(t)}) at line {line}"
        for m, deps in import_graph().items()
        for t, line in deps.items()
        if floor(t) > floor(m) and floor(m) < 4
    ]
    assert up == []


def test_only_the_faces_import_the_facade():
    importers = sorted(m for m, deps in import_graph().items() if "memstore.store" in deps)
    assert importers and all(floor(m) == 4 for m in importers), importers


def test_the_floor_check_sees_an_arrow_up():
    assert (
        floor("memstore.forget.remove") == 2
        and floor("memstore.store") == 3
        and floor("memstore.core") == 1
    )
    assert floor("memstore.format.pack") == 0 and floor("memstore.cli.common") == 4


# ----- one module runs git -------------------------------------------------------------------------


def git_offences(rel: str, source: str) -> list[str]:
    """Where a module runs git itself: imports gitpython, or starts a process whose command is git."""
    out = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] in ("git", "git_filter_repo") for a in node.names
        ):
            out.append(f"{rel}:{line}: imports git")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
            "git",
            "git_filter_repo",
        ):
            out.append(f"{rel}:{line}: imports git")
        elif isinstance(node, ast.List) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and first.value == "git":
                out.append(f"{rel}:{line}: a git command line")
    return out


def test_only_gitrepo_runs_git():
    offences = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel != "memstore/gitrepo.py":
            offences += git_offences(rel, path.read_text(encoding="utf-8"))
    assert offences == [], "git runs through memstore/gitrepo.py:\n" + "\n".join(offences)


def test_the_git_finder_finds_git():
    src = "import git\nfrom git.cmd import Git\nsubprocess.run(['git', 'status'])\nx = ['gitx']\n"
    assert git_offences("m.py", src) == [
        "m.py:1: imports git",
        "m.py:2: imports git",
        "m.py:3: a git command line",
    ]


# ----- the hooks memstore installs ---------------------------------------------------------------


def test_the_package_list_names_every_package():
    """pyproject.toml lists the packages (one is mapped from hooks/); a new package must be added."""
    conf = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]
    found = sorted(m for m, p in modules().items() if p.name == "__init__.py")
    assert sorted(set(conf["packages"]) - {"memstore.githooks"}) == found
    assert conf["package-dir"] == {"memstore.githooks": "hooks"}
    names = sorted(p.name for p in (REPO / "hooks").iterdir())
    assert sorted(conf["package-data"]["memstore.githooks"]) == names


@pytest.mark.slow
def test_the_wheel_carries_the_hooks(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("memstore-*.whl")
    with zipfile.ZipFile(wheel) as z:
        for p in (REPO / "hooks").iterdir():
            assert z.read(f"memstore/githooks/{p.name}") == p.read_bytes(), p.name
        z.extractall(tmp_path / "site")
    # installed from the wheel (no checkout beside it), memstore finds its hook files there
    code = (
        "from memstore.upkeep import hooks; import sys; "
        "assert 'site' in str(hooks.__file__), hooks.__file__; "
        "sys.stdout.write(hooks.stub('post-merge'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == (REPO / "hooks" / "post-merge").read_text()


# ----- SQL against the index lives in memstore/index/ ------------------------------------------------

# Modules that may hold SQL: the index owns its schema and every query on it; the benchmarks are
# not product code. The embedding cache (adapters/cache.py) and the topic tree's replay cache
# (format/treerows.py) are databases of their own, not the index.
SQL_HOMES = ("memstore/index/", "memstore/bench/")
OWN_DATABASES = {"memstore/adapters/cache.py", "memstore/format/treerows.py"}
# the one choice of SQLite driver (every database of a process opened by one library)
SQLITE_DRIVER = "memstore/sqlitedb.py"
_SQL = re.compile(
    r"\bSELECT\b.*\bFROM\b|\bINSERT INTO\b|\bUPDATE\b.*\bSET\b|\bDELETE FROM\b|\bCREATE (?:TABLE|INDEX)\b",
    re.S,
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
    parts = {
        id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values
    }  # judged whole
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _EXECUTE
        ):
            if not _is_git_execute(rel, node):
                out.append(f"{rel}:{line}: calls .{node.func.attr}()")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            out += [
                f"{rel}:{line}: imports {n}"
                for n in names
                if n.split(".")[0] in ("sqlite3", "sqlite_utils", "pysqlite3", "sqlitedb")
            ]
        elif isinstance(node, ast.Attribute) and node.attr == "conn":
            out.append(f"{rel}:{line}: uses .conn")
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            if _SQL.search(text):
                out.append(f"{rel}:{line}: SQL in an f-string")
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts
        ):
            if _SQL.search(node.value):
                out.append(f"{rel}:{line}: SQL in a string")
    return sorted(out, key=lambda o: (int(o.split(":")[1]), o))


def test_sql_only_in_index():
    offences = []
    scanned = 0
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).as_posix()
        if rel.startswith(SQL_HOMES) or rel in OWN_DATABASES or rel == SQLITE_DRIVER:
            continue
        scanned += 1
        source = path.read_text(encoding="utf-8")
        offences += sql_offences(rel, source)
    assert scanned > 50  # the scan sees the package
    assert offences == [], "SQL and SQLite connections belong in memstore/index/:\n" + "\n".join(
        offences
    )


def test_the_sql_finder_finds_sql():
    source = (
        "import sqlite3\n"
        "def f(index, where):\n"
        "    from ..sqlitedb import sqlite3\n"
        "    index.conn.execute(f'SELECT rowid FROM records WHERE {where}')\n"
        "    db.executemany('INSERT INTO t VALUES (?)', [])\n"
        "    q = 'DELETE FROM t'\n"
        "    Git('.').execute(['git', 'status'])\n"
    )
    found = sql_offences("memstore/x.py", source)
    assert found == [
        "memstore/x.py:1: imports sqlite3",
        "memstore/x.py:3: imports sqlitedb",
        "memstore/x.py:4: SQL in an f-string",
        "memstore/x.py:4: calls .execute()",
        "memstore/x.py:4: uses .conn",
        "memstore/x.py:5: SQL in a string",
        "memstore/x.py:5: calls .executemany()",
        "memstore/x.py:6: SQL in a string",
        "memstore/x.py:7: calls .execute()",  # Git(...).execute is allowed in gitrepo.py only
    ]
    assert sql_offences("memstore/gitrepo.py", "Git('.').execute(['git', 'status'])\n") == []


# ----- each package says what it holds ------------------------------------------------------------


def test_each_package_docstring_names_its_nouns_and_real_sections_of_the_format_doc():
    """Every package opens with what it holds; the sections of docs/format.md it names exist."""
    headings = [
        line.lstrip("#").strip()
        for line in (REPO / "docs" / "format.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    ]
    missing, named = [], 0
    for name, path in modules().items():
        if path.name != "__init__.py" or name == "memstore":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert len(doc) > 80, f"{name}: the package docstring says what it holds"
        if "docs/format.md" not in doc:
            continue
        for section in (" ".join(s.split()) for s in re.findall(r'"([^"]+)"', doc)):
            named += 1
            if not any(h == section or h.startswith(section + " ") for h in headings):
                missing.append(f"{name}: {section!r}")
    assert named > 20 and missing == []
