"""Shared CLI plumbing: finding stores, printing JSON, progress bars."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

import click


@dataclass
class Ctx:
    store_paths: list[str]
    quiet: bool = False
    verbose: int = 0
    _stores: list = field(default_factory=list)
    _heads: dict = field(default_factory=dict)  # store root -> detached HEAD's commit when opened

    def store(self, index: bool = False, without_key: bool = False):
        """The one store this command works on (`without_key`: see Store.open; ct fsck)."""
        if len(self.store_paths) > 1:
            raise click.UsageError("this command works on one store; give -C once")
        if without_key and not self._stores:
            from ..store import Store

            self._stores = [Store.open(self.store_paths[0] if self.store_paths else None,
                                       without_key=True)]  # fmt: skip
            self._heads = {st.root: st.detached_head() for st in self._stores}
        stores = self.stores(index=index)
        return stores[0]

    def stores(self, index: bool = False):
        from ..store import Store

        if not self._stores:
            paths = self.store_paths or [None]
            self._stores = [Store.open(p) for p in paths]
            self._heads = {st.root: st.detached_head() for st in self._stores}
            for st in self._stores:  # reads go on mid-merge (writes refuse), but say what they show
                for warning in (st.unfinished(), st.sealing_note()):
                    if warning:
                        click.echo(f"memstore: warning: {warning}", err=True)
        if index:
            for st in self._stores:
                with progress_for(self, "Indexing") as bar:
                    st.index(progress=bar)  # rolls back a writer that died mid-write first
        return self._stores

    def warn_problems(self) -> None:
        """After a command: a store whose index met damaged files (a record with no vector, a line
        that does not parse) says so once, pointing at `ct fsck`, which names each and what to run;
        a commit made on a detached HEAD says it is on no branch, before a checkout leaves it behind."""
        for st in self._stores:
            head = st.detached_head()
            if head and head != self._heads.get(st.root):
                click.echo(
                    f"memstore: warning: {st.root}: HEAD is detached, so commit {head[:10]} is on no branch; "
                    f'"git switch -c NAME" keeps it on a new branch (after a checkout of a branch only '
                    f"git reflog finds it)",
                    err=True,
                )
            note = (
                st._index.note if st._index is not None else None
            )  # a damaged index met and rebuilt
            if note:
                click.echo(f"memstore: note: {st.root}: {note}", err=True)
            problems = st.index_problems()  # git mid-merge was said when the store was opened
            if problems and not self.quiet:
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                click.echo(
                    f'memstore: warning: {st.root}: {problems[0]}{more}; "ct fsck" says what happened and what to run',
                    err=True,
                )

    def say(self, msg: str) -> None:
        if not self.quiet:
            click.echo(msg, err=True)


def emit_json(obj) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, indent=None))


class _Bar:
    """A tqdm bar that appears only on a terminal and only for work that takes a while; each part
    of the work (`stage`: embedding, placing in topics, …) gets a bar of its own under the
    command's name (memstore/progress.py)."""

    def __init__(self, ctx: Ctx, desc: str, total: int | None):
        self.bar = None
        self.ctx, self.name, self.desc, self.total = ctx, desc, desc, total

    def stage(self, desc: str, total: int | None = None) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.desc, self.total = f"{self.name}: {desc}", total

    def __call__(self, n: int = 1):
        if self.bar is None and not self.ctx.quiet and sys.stderr.isatty():
            from tqdm import tqdm

            # no monitor thread: a write of a process with one thread shares its work with a
            # second core (memstore/workers.py), which a second thread would rule out
            tqdm.monitor_interval = 0
            self.bar = tqdm(
                total=self.total, desc=self.desc, unit="", leave=False, mininterval=0.5, delay=1.0
            )
        if self.bar is not None:
            self.bar.update(n)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()


def progress_for(ctx: Ctx, desc: str, total: int | None = None) -> _Bar:
    return _Bar(ctx, desc, total)


def read_text_arg(text: str) -> str:
    return sys.stdin.read() if text == "-" else text


def short_date(ts: str, tz) -> str:
    from ..format.timeutil import from_iso

    return from_iso(ts).astimezone(tz).strftime("%Y-%m-%d %H:%M")


def short_author(author: str | None) -> str:
    """An author as a hit line shows it: the name without the email ("Ana Lopez <ana@x.org>" ->
    "Ana Lopez"), the email when there is no name, "" for a record without one (unknown)."""
    if not author:
        return ""
    name, _, rest = author.partition("<")
    return name.strip() or rest.rstrip(">").strip() or author


def one_line(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def secret_options(what: str = "Write"):
    """--allow-secrets / --skip-secrets / --redact-secrets, handed to the command as one `secrets` mode."""
    import functools

    def deco(f):
        @functools.wraps(f)
        def wrapper(*args, allow_secrets=False, skip_secrets=False, redact_secrets=False, **kwargs):
            chosen = [
                n
                for n, on in (
                    ("allow", allow_secrets),
                    ("skip", skip_secrets),
                    ("redact", redact_secrets),
                )
                if on
            ]
            if len(chosen) > 1:
                from ..errors import UsageError

                raise UsageError(
                    "--allow-secrets, --skip-secrets and --redact-secrets exclude each other; pass one."
                )
            return f(*args, secrets=chosen[0] if chosen else "refuse", **kwargs)

        wrapper = click.option(
            "--redact-secrets",
            is_flag=True,
            help="Replace each detected secret by [REDACTED <kind>] and say so in the record's meta.",
        )(wrapper)
        wrapper = click.option(
            "--skip-secrets",
            is_flag=True,
            help="Leave out the records that hold a detected secret (listed by file and line).",
        )(wrapper)
        wrapper = click.option(
            "--allow-secrets",
            is_flag=True,
            help=f"{what} verbatim even what looks like credentials.",
        )(wrapper)
        return wrapper

    return deco
