"""One front door: every `ct` command calls the `Store` method of the same name with the same
options, and the faces (CLI, HTTP, MCP, the web page) import only the public API, errors and
formatting helpers. Listed side by side here and in docs/python-api.md."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from conftest import imports_of

from memstore.cli import COMMANDS, cli
from memstore.store import Store

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "memstore"

# Commands that are not a verb of one store, and why.
NOT_A_VERB = {
    "bench": "measures the product on stores it builds itself (memstore.bench)",
    "serve": "a face of its own (memstore/serve/http.py): the verbs over HTTP and the web page",
    "mcp": "a face of its own (memstore/serve/mcp.py): the verbs as MCP tools",
    "tokens": "access to the servers, not to a store: a tokens file kept outside every store "
    "(memstore/serve/tokens.py)",
}
# The hidden command git's hook stubs run is the `run` action of the `hooks` verb.
VERB_OF = {"import": "import_", "hook": "hooks"}


def verb(command: str) -> str:
    return VERB_OF.get(command, command.replace("-", "_"))


def leaf_commands():
    """(`ct` words, click command) for every command and subcommand a user can run."""
    for name in sorted(COMMANDS):
        if name in NOT_A_VERB:
            continue
        cmd = cli.get_command(click.Context(cli), name)
        if isinstance(cmd, click.Group):
            for sub in sorted(cmd.commands):
                yield f"{name} {sub}", cmd.commands[sub]
        else:
            yield name, cmd


# ----------------------------------------------------------------------------- names and options

# Options that only shape the printed output (or read the input) and so have no API counterpart.
OUTPUT_ONLY = {"as_json", "explain", "oneline", "fmt", "no_summaries", "depth", "queries"}
# CLI option name -> API parameter name, where the CLI's is shorter or reads better on a command line.
RENAMED = {
    "topk": "k",
    "type_": "type",
    "no_index": "update_index",
    "n_markers": "markers",
    "n_lines": "lines",
    "do_repair": "repair",
    "done_id": "done",
    "no_push": "push",
    "debug": "verbose",
    "revs": "rev_a",
    "file": "path",
    "folder": "path",
    "allow_secrets": "secrets",  # the three secret flags are one `secrets` mode: refuse, allow, skip, redact
    "skip_secrets": "secrets",
    "redact_secrets": "secrets",
}
# Per command: options handled by the face itself (a loop, a prompt), with the reason.
FACE_ONLY = {
    "chat": {"once"},  # --once asks one question through the session `chat()` returns, then exits
    "share": {"yes"},  # --yes answers the confirmation the command asks on a terminal
}


@pytest.mark.parametrize(
    "words,cmd", list(leaf_commands()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_command_option_is_a_parameter_of_its_verb(words, cmd):
    method = getattr(Store, verb(words.split()[0]), None)
    assert callable(method), f"ct {words}: Store has no method {verb(words.split()[0])!r}"
    params = set(inspect.signature(method).parameters)
    missing = []
    for p in cmd.params:
        name = RENAMED.get(p.name, p.name)
        if p.name in OUTPUT_ONLY or p.name in FACE_ONLY.get(words.split()[0], ()):
            continue
        if words.split()[0] in ("hooks", "hook") and p.name in ("name", "args"):
            continue  # `ct hook NAME ARGS…` → hooks("run", name, args): checked by the call test below
        if name not in params:
            missing.append(p.name)
    assert not missing, (
        f"ct {words}: options {missing} have no parameter in Store.{method.__name__}{inspect.signature(method)}"
    )


def test_every_command_has_a_verb_and_the_docs_list_them_side_by_side():
    doc = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    for name in sorted(COMMANDS):
        if name in NOT_A_VERB:
            continue
        assert callable(getattr(Store, verb(name), None)), f"ct {name} has no Store.{verb(name)}"
        if name != "hook":  # hidden: git runs it, people do not
            assert re.search(rf"\| `ct {name}\b[^`]*`[^|]* \| `{verb(name)}\(", doc), (
                f"docs/python-api.md's table has no row for ct {name} → {verb(name)}()"
            )


# ------------------------------------------------------------------------- each command calls it


class Called(Exception):
    pass


def _args(tmp_path, store_root):
    f = tmp_path / "in.jsonl"
    f.write_text(
        '{"ts": "2026-11-24T10:00:00Z", "role": "user", "text": "hello"}\n', encoding="utf-8"
    )
    topics = tmp_path / "topics.txt"
    topics.write_text("Espresso\n", encoding="utf-8")
    return {
        "init": ["init", str(tmp_path / "new"), "--embedder", "hash", "--dim", "64"],
        "stat": ["stat"],
        "fsck": ["fsck", "--repair"],
        "index": ["index", "-B"],
        "hooks install": ["hooks", "install"],
        "hooks uninstall": ["hooks", "uninstall"],
        "hooks status": ["hooks", "status"],
        "keys new": ["keys", "new", str(tmp_path / "identity.txt")],
        "keys show": ["keys", "show"],
        "keys list": ["keys", "list"],
        "keys add": ["keys", "add", "age1xyz"],
        "keys remove": ["keys", "remove", "age1xyz"],
        "keys rotate": ["keys", "rotate", "--rewrite"],
        "keys trust": ["keys", "trust", "3"],
        "encrypt": ["encrypt", "--recipient", "age1xyz", "--rewrite-history"],
        "hook": ["hook", "post-commit"],
        "log": ["log", "-n", "3"],
        "sync": ["sync", "--no-push"],
        "reembed": ["reembed", "--embedder", "hash", "--dim", "32"],
        "gc": ["gc", "-n"],
        "add": ["add", "--role", "assistant", "hello"],
        "forget": ["forget", "--match", "hello", "-n"],
        "share": ["share", "0123abcd", "-n"],
        "ingest-path": ["ingest-path", str(f)],
        "ingest-any": ["ingest-any", str(f)],
        "import jsonl": ["import", "jsonl", str(f)],
        "import claude-code": ["import", "claude-code", str(f)],
        "import chatgpt": ["import", "chatgpt", str(f)],
        "import trace": ["import", "trace", str(f)],
        "import lossless-memory": ["import", "lossless-memory", str(tmp_path)],
        "import contexttape": ["import", "contexttape", str(tmp_path)],
        "watch": ["watch", "--once", str(f)],
        "search": ["search", "-k", "3", "--mode", "exact", "--role", "user", "hello"],
        "recall": ["recall", "-k", "2", "what did we say yesterday"],
        "mark": ["mark", "--done", "0123abcd"],
        "where": ["where", "-n", "4"],
        "tree": ["tree"],
        "context": ["context", "--budget", "300", "hello"],
        "chat": ["chat", "--once", "hi"],
        "reorganize": ["reorganize", "-n"],
        "diff": ["diff", "HEAD"],
        "build-wiki": ["build-wiki", "--topics-file", str(topics), "--limit", "1"],
        "upgrade": ["upgrade", "-n"],
        "export contexttape": ["export", "contexttape", str(tmp_path / "tape")],
    }


# What the call must carry: a few options per command, checked by value.
EXPECT = {
    "encrypt": {"recipients": ["age1xyz"], "rewrite_history": True},
    "search": {"k": 3, "mode": "exact", "role": ("user",)},
    "recall": {"k": 2},
    "mark": {"done": "0123abcd"},
    "where": {"lines": 4},
    "add": {"role": "assistant"},
    "forget": {"match": "hello", "dry_run": True},
    "share": {"dry_run": True},
    "fsck": {"repair": True},
    "index": {"rebuild": True},
    "log": {"max_count": 3},
    "sync": {"push": False},
    "reembed": {"dim": 32},
    "gc": {"dry_run": True},
    "context": {"budget": 300},
    "reorganize": {"dry_run": True},
    "upgrade": {"dry_run": True},
    "build-wiki": {"limit": 1},
    "init": {"dim": 64},
    "watch": {"once": True},
}


def test_each_command_calls_the_verb_of_its_name(tmp_path, monkeypatch):
    root = Store.init(tmp_path / "store", embedder="hash", timezone="UTC").root
    args = _args(tmp_path, root)
    commands = [w for w, _ in leaf_commands()]
    assert sorted(args) == sorted(commands), "a command without a call check: add it to _args"
    for words in commands:
        name = words.split()[0]
        seen = {}

        def spy(*a, _name=verb(name), **kw):
            seen["call"] = (a, kw)
            raise Called(_name)

        if (
            name == "hook"
        ):  # a hook never fails git: the command swallows every error, the spy's too
            seen.clear()
        with monkeypatch.context() as m:
            m.setattr(Store, verb(name), classmethod(spy) if name == "init" else spy)
            if (
                name == "index"
            ):  # the verb `index` is also how every read brings the index up to date
                m.setattr(Store, "unfinished", lambda self: None)
            result = CliRunner().invoke(cli, ["-C", str(root), *args[words]])
        assert isinstance(result.exception, Called) or (name == "hook" and "call" in seen), (
            f"ct {words} did not call Store.{verb(name)}: exit {result.exit_code}\n{result.output}\n{result.exception!r}"
        )
        a, kw = seen["call"]
        bound = {**dict(enumerate(a)), **kw}
        for key, want in EXPECT.get(name, {}).items():
            got = kw.get(key)
            assert got == want or (isinstance(want, tuple) and tuple(got or ()) == want), (
                f"ct {words}: Store.{verb(name)} got {key}={got!r}, expected {want!r} ({bound})"
            )
        if words.startswith("import "):
            assert a[1] == words.split()[1], a  # the kind
        if words.startswith("hooks ") or words == "hook":
            assert a[1] == (words.split()[1] if words != "hook" else "run"), a
        if words.startswith("keys "):
            assert a[1] == words.split()[1], a  # the action (new and show: on the class)


# ------------------------------------------------------------------------------- what faces import

FACES = ["cli", "serve", "integrations"]
# The public API, its errors and result types, and the helpers that only format what it returns.
ALLOWED = {
    "memstore": "the package (its version)",
    "memstore.store": "Store, the public API",
    "memstore.results": "the result types",
    "memstore.errors": "the errors and their exit codes",
    "memstore.format.timeutil": "formatting: times as text in the store's timezone",
    "memstore.tree.render": "formatting: the topic tree as text, mermaid, dot or JSON",
    "memstore.secrets.detect": "formatting: the secret detector masks what the web page shows",
    "memstore.secrets.policy": "formatting: every error message masked for secrets (user_message)",
}
# `ct bench` is the benchmark's own front end (NOT_A_VERB).
ALLOWED_IN = {
    "memstore/cli/bench_cmds.py": {"memstore.bench.speed"},
    # `ct serve` and `ct mcp` start the other faces (NOT_A_VERB)
    "memstore/cli/serve_cmds.py": {"memstore.serve.http", "memstore.serve.mcp"},
}


def _face_files():
    for face in FACES:
        path = PKG / face
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _imports(path: Path):
    """(line, module) for every import, function-level ones too; `from memstore.tree import render`
    names the module memstore.tree.render."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    for line, mod, names in imports_of(path, package):
        for name in names or [None]:
            sub = PKG.parent / f"{mod}.{name}".replace(".", "/") if name else None
            yield (
                line,
                f"{mod}.{name}"
                if sub and (sub.with_suffix(".py").exists() or sub.is_dir())
                else mod,
            )


def _own(mod: str) -> bool:
    return any(
        mod == f"memstore.{f.removesuffix('.py')}"
        or mod.startswith(f"memstore.{f.removesuffix('.py')}.")
        for f in FACES
    )


def test_faces_import_only_the_public_api_errors_and_formatting():
    bad = []
    for path in _face_files():
        rel = path.relative_to(REPO).as_posix()
        for line, mod in _imports(path):
            if (
                not mod.startswith("memstore")
                or _own(mod)
                or mod in ALLOWED
                or mod in ALLOWED_IN.get(rel, ())
            ):
                continue
            bad.append(f"{rel}:{line} imports {mod}")
    assert not bad, "faces must call Store verbs, not feature modules:\n" + "\n".join(bad)


def test_the_face_import_check_can_fail(tmp_path):
    """The scan sees function-level imports, relative ones included."""
    p = PKG / "cli" / "_probe_for_test.py"
    p.write_text("def f():\n    from ..retrieve.search import search\n", encoding="utf-8")
    try:
        found = [mod for _, mod in _imports(p)]
    finally:
        p.unlink()
    assert found == ["memstore.retrieve.search"]


def test_a_bad_record_is_one_message_on_every_face(store):
    """RecordError becomes a UsageError in Store.add, so the CLI, HTTP and MCP say the same thing."""
    from memstore.errors import UsageError

    with pytest.raises(UsageError) as exc:
        store.add("hello", role="robot")
    assert str(exc.value).startswith("cannot add: field 'role'")
    result = CliRunner().invoke(cli, ["-C", str(store.root), "add", "--role", "robot", "hello"])
    assert result.exit_code == 2 and "cannot add: field 'role'" in result.output
    assert json.dumps(str(exc.value))  # the MCP and HTTP faces send str(exc)
