"""`ct` (a face): a thin click layer that parses arguments, calls the `Store` verb of the command's
name and formats its result. Every command and flag is listed in docs/cli.md.

Commands are loaded lazily from their modules so that `ct --help` imports no heavy code.
"""

from __future__ import annotations

import importlib
import io
import os
import re
import sys

import click

from .. import __version__

# command name -> "module:attribute" (modules under memstore.cli)
COMMANDS = {
    "init": "store_cmds:init_cmd",
    "stat": "store_cmds:stat_cmd",
    "fsck": "store_cmds:fsck_cmd",
    "index": "store_cmds:index_cmd",
    "hooks": "store_cmds:hooks_cmd",
    "log": "store_cmds:log_cmd",
    "sync": "store_cmds:sync_cmd",
    "reembed": "store_cmds:reembed_cmd",
    "gc": "store_cmds:gc_cmd",
    "add": "write_cmds:add_cmd",
    "forget": "forget_cmds:forget_cmd",
    "share": "forget_cmds:share_cmd",
    "ingest-path": "write_cmds:ingest_path_cmd",
    "import": "write_cmds:import_cmd",
    "watch": "watch_cmds:watch_cmd",
    "search": "read_cmds:search_cmd",
    "bench": "bench_cmds:bench_cmd",
    "recall": "read_cmds:recall_cmd",
    "mark": "write_cmds:mark_cmd",
    "where": "read_cmds:where_cmd",
    "mcp": "serve_cmds:mcp_cmd",
    "ingest-any": "write_cmds:ingest_any_cmd",
    "tree": "tree_cmds:tree_cmd",
    "context": "read_cmds:context_cmd",
    "chat": "serve_cmds:chat_cmd",
    "reorganize": "tree_cmds:reorganize_cmd",
    "diff": "tree_cmds:diff_cmd",
    "hook": "store_cmds:hook_cmd",
    "build-wiki": "write_cmds:build_wiki_cmd",
    "serve": "serve_cmds:serve_cmd",
    "tokens": "serve_cmds:tokens_cmd",
    "upgrade": "store_cmds:upgrade_cmd",
    "export": "store_cmds:export_cmd",
    "keys": "keys_cmds:keys_cmd",
    "encrypt": "keys_cmds:encrypt_cmd",
}
HIDDEN = {"hook"}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, _, attr = target.partition(":")
        module = importlib.import_module(f"{__name__}.{module_name}")
        cmd = getattr(module, attr)
        if name in HIDDEN:
            cmd.hidden = True
        return cmd

    def format_commands(self, ctx, formatter):
        # Short help without importing every command module.
        rows = [(name, SUMMARIES.get(name, "")) for name in sorted(COMMANDS) if name not in HIDDEN]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx):
        from ..errors import MemstoreError

        try:
            result = super().invoke(ctx)
            if ctx.invoked_subcommand != "fsck" and ctx.obj is not None:
                ctx.obj.warn_problems()
            return result
        except MemstoreError as exc:
            from ..secrets.policy import user_message

            click.echo(f"Error: {user_message(exc)}", err=True)
            ctx.exit(exc.exit_code)
        except Exception as exc:
            said = environment_error(exc)
            if said is None:
                raise
            click.echo(f"Error: {said}", err=True)
            ctx.exit(1)


_FULL = "Free some space and run the command again"
_AFTER = 'a write cut short is rolled back by the next write or by "ct fsck --repair".'


def environment_error(exc: BaseException) -> str | None:
    """A clear sentence for what the machine refused (a full disk, a read-only or forbidden
    file), instead of a traceback; None for anything else, which stays a traceback (a bug)."""
    import errno

    if _from_sqlite(exc) and "full" in str(exc).lower():  # SQLITE_FULL
        return f"the disk is full (the search index could not grow). {_FULL}; {_AFTER}"
    if not isinstance(exc, OSError) or exc.errno is None:
        return None
    where = f": {exc.filename}" if exc.filename else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk is full ({exc.strerror}{where}). {_FULL}; {_AFTER}"
    if exc.errno == errno.EROFS:
        return f"the store is on a read-only file system ({exc.strerror}{where})."
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"not allowed to write or read a file of the store ({exc.strerror}{where}); {_AFTER}"
    return None


def _from_sqlite(exc: BaseException) -> bool:
    """Whether SQLite raised `exc`, through whichever driver memstore/sqlitedb.py chose."""
    return type(exc).__module__.split(".")[0] in ("sqlite3", "pysqlite3")


SUMMARIES = {
    "init": "Create a memory store (a git repository) in PATH.",
    "stat": "Show counts: records, days, packs, bytes, tokens.",
    "fsck": "Verify every invariant of the store format.",
    "index": "Bring the disposable search index up to date.",
    "hooks": "Install, remove or inspect the git hooks.",
    "log": "Show the memory's history from git.",
    "sync": "Merge the remote's memory, reindex, push.",
    "reembed": "Re-embed every record with another embedder (one commit).",
    "gc": "Consolidate each day's packs into one (one commit).",
    "add": "Add one conversation turn.",
    "forget": "Remove records from every committed file (and, asked, from history).",
    "share": "Make private records shared, after showing what will be shared.",
    "ingest-path": "Ingest files or folders as document chunks.",
    "import": "Import conversations (claude-code, chatgpt, jsonl, trace, ...) or a ContextTape store.",
    "watch": "Follow growing transcripts; import new lines in batches (one commit each).",
    "search": "Search the store: exact, vector or hybrid.",
    "bench": "Measure search, index and ingest speed against numpy and ContextTape.",
    "recall": "Recall what was said: a time phrase → verbatim lines in order.",
    "mark": 'Set or close a "where are we now" marker (one commit).',
    "where": "Show where the conversation stands: open markers, latest lines.",
    "mcp": "Serve the store to AI agents over MCP (stdio).",
    "ingest-any": "Ingest any files: text as chunks, PDFs, images, audio, others as blobs.",
    "tree": "Show the topic tree (text, mermaid or dot).",
    "context": "Build prompt context for a query under a token budget.",
    "chat": "Chat with memory through an OpenAI-compatible LLM; turns are stored.",
    "reorganize": "Merge related frozen topics and archive trivial turns (one commit).",
    "diff": "Explain how the topic tree changed between two versions.",
    "build-wiki": "Fetch Wikipedia articles and ingest them as documents (one commit).",
    "serve": "Serve a web page to look at memory and an HTTP JSON API on localhost.",
    "tokens": "Make bearer tokens for ct serve --tokens and ct mcp --http.",
    "upgrade": "Turn a format-1 store into format 2 (one commit, lossless).",
    "export": "Write the store as a classic ContextTape store (export contexttape DIR).",
    "keys": "Identities and recipients of encrypted stores (new, list, add, remove, rotate, trust).",
    "encrypt": "Encrypt a plaintext store in one commit (and, asked, its history).",
}


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-C",
    "stores",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Run on the store at PATH (repeat for several stores). Default: $MEMSTORE_DIR, "
    "else the store at or above the current folder.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only results and errors.")
@click.option("-v", "--verbose", count=True, help="Print more detail.")
@click.option(
    "--identity",
    type=click.Path(dir_okay=False),
    default=None,
    help="Your age identity (or SSH ed25519 key) for encrypted stores. Default: "
    "$MEMSTORE_IDENTITY, else age-identity.txt beside your memstore config.",
)
@click.version_option(__version__, prog_name="ct")
@click.pass_context
def cli(ctx, stores, quiet, verbose, identity):
    """ct — a git-native memory store for people and LLM agents.

    Every command that changes memory makes one git commit; read commands bring the
    disposable index up to date first, like make.

    Exit codes: 0 ok, 1 error or damage found, 2 usage, 3 not a store, 4 bad input file,
    5 unsupported format version, 6 embedder mismatch, 7 lock timeout, 8 git failed,
    9 secrets found, 10 no key of yours opens the encrypted store.
    """
    from .common import Ctx

    if identity:  # read by memstore/keyring.py, here and in the git hooks this command runs
        before = os.environ.get("MEMSTORE_IDENTITY")
        os.environ["MEMSTORE_IDENTITY"] = os.path.abspath(os.path.expanduser(identity))
        ctx.call_on_close(lambda: _restore("MEMSTORE_IDENTITY", before))

    ctx.obj = Ctx(list(stores), quiet, verbose)


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def main(argv=None):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out, err = sys.stdout, sys.stderr
    if _is_terminal(out):
        sys.stdout = TerminalText(out)
    if _is_terminal(err):  # (the progress bar's carriage returns are its own: kept)
        sys.stderr = TerminalText(err, keep_cr=True)
    try:
        cli.main(args=argv, prog_name="ct", standalone_mode=True)
    except BrokenPipeError:
        sys.exit(0)
    finally:
        for name, stream in (("stdout", out), ("stderr", err)):
            if isinstance(getattr(sys, name), TerminalText):
                getattr(sys, name).flush()
                setattr(sys, name, stream)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


# Control characters a terminal acts on, shown as what they are instead: a stored text is someone
# else's words (an imported export, a model's answer), and an escape sequence in it could retitle
# the window, hide lines or write the clipboard (OSC 52) when `ct search` or `ct tree` prints it.
# Tab and line feed stay; a carriage return stays before a line feed (CRLF text), else it is shown.
_SHOWN = {c: chr(0x2400 + c) for c in range(0x20) if c not in (9, 10, 13)}
_SHOWN[0x7F] = "\u2421"
_SHOWN.update({c: f"\\x{c:02x}" for c in range(0x80, 0xA0)})
_LONE_CR = re.compile(r"\r(?!\n)")


class TerminalText(io.TextIOBase):
    """stdout (or stderr) on a terminal, with the control characters of what is written shown, not
    obeyed (a pipe or a file gets the exact text: `--json` readers and scripts see the bytes
    stored); `keep_cr` keeps carriage returns (stderr's progress bar redraws its line with them)."""

    def __init__(self, inner, keep_cr: bool = False):
        self.inner, self.keep_cr = inner, keep_cr

    def write(self, text: str) -> int:
        shown = text.translate(_SHOWN)
        if "\r" in shown and not self.keep_cr:
            shown = _LONE_CR.sub("\u240d", shown)
        self.inner.write(shown)
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self):
        return self.inner.encoding

    @property
    def buffer(self):
        return _TerminalBytes(self)


class _TerminalBytes:
    """TerminalText's `buffer`: bytes written to the terminal are shown the same way."""

    def __init__(self, text: TerminalText):
        self.text = text

    def write(self, data: bytes) -> int:
        self.text.write(bytes(data).decode(self.text.encoding or "utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        self.text.flush()


def run(argv=None) -> None:
    """The `ct` program: `main`, then leave without tearing the interpreter down.

    A command has committed, closed and flushed what it writes before it returns; what teardown
    adds is freeing every loaded module's objects one by one, 40-60 ms once numpy, gitpython and
    sqlite3 are in (a third of a `ct add`). atexit handlers still run first. A thread that is not
    a daemon, or an exit status that is not a number, takes the ordinary way out.
    """
    import threading

    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    if not isinstance(code, int) or any(
        t is not threading.current_thread() and not t.daemon and t.is_alive()
        for t in threading.enumerate()
    ):
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (
            OSError,
            ValueError,
        ):  # a reader that went away, or a closed stream: nothing to keep
            pass
    os._exit(code)
