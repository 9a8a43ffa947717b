"""Commands on the store as a whole: init, stat, fsck, index, hooks (and the hidden hook), log,
sync, reembed, gc, upgrade and export."""

from __future__ import annotations

import click
from pathlib import Path

from .common import emit_json, progress_for


@click.command("init")
@click.argument("path", default=".", type=click.Path(file_okay=False))
@click.option("--embedder", default="minilm", show_default=True, help="minilm | hash | openai")
@click.option(
    "--timezone",
    "timezone",
    default=None,
    help="IANA timezone for day files (default: this machine's).",
)
@click.option(
    "--dtype",
    type=click.Choice(["float32", "int8"]),
    default="float32",
    show_default=True,
    help="How vectors are stored in packs.",
)
@click.option("--dim", type=int, default=None, help="Vector size (hash and openai embedders).")
@click.option("--model", default=None, help="Model name (openai embedder).")
@click.option(
    "--encrypt",
    is_flag=True,
    help="Encrypt the store: seal every committed line to your identity and each --recipient.",
)
@click.option(
    "--recipient",
    "recipients",
    multiple=True,
    help="Another reader of an --encrypt store (age1… or 'ssh-ed25519 AAAA…'); repeatable.",
)
@click.pass_obj
def init_cmd(obj, path, embedder, timezone, dtype, dim, model, encrypt, recipients):
    """Create a memory store (a git repository) in PATH.

    Example: ct init ~/memory --timezone Europe/Berlin
    """
    from ..errors import UsageError
    from ..store import Store

    if recipients and not encrypt:
        raise UsageError("--recipient needs --encrypt.")
    st = Store.init(
        path,
        embedder=embedder,
        timezone=timezone,
        dtype=dtype,
        dim=dim,
        model=model,
        encrypt=encrypt,
        recipients=list(recipients),
    )
    obj.say(
        f"Initialised memory store in {st.root} (embedder {st.config.embedder['name']}, timezone {st.config.timezone})."
    )


@click.command("stat")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def stat_cmd(obj, as_json):
    """Show counts: records, days, packs, bytes, tokens.

    Example: ct stat --json
    """
    info = obj.store().stat().to_json()
    if as_json:
        emit_json(info)
        return
    for key, value in info.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        click.echo(f"{key:16} {value}")


@click.command("fsck")
@click.option(
    "--repair",
    "do_repair",
    is_flag=True,
    help="First roll back what an interrupted write left (uncommitted lines, packs or segments, "
    "temp files) and bring the index up to date; committed data is never changed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_obj
def fsck_cmd(obj, do_repair, as_json):
    """Verify every invariant of the store format; exit 1 naming each damaged file.

    An encrypted store no identity of yours opens is checked by form only (every line sealed, of
    a known key epoch; key files, recipient lists and packs well formed; who changed the
    recipients): the report says what it could not check, and the exit code is 10 when the form
    is sound (1 when it is damaged).

    Example: ct fsck --repair
    """
    rep = obj.store(without_key=True).fsck(repair=do_repair)
    fixed = rep.repair
    if fixed is not None:
        if not as_json:
            for line in fixed.notes() or ["repair: nothing to roll back"]:
                click.echo(line)
            for line in fixed.untouched:
                click.echo(f"left alone: {line}")
            if fixed.index and (fixed.index["reindexed"] or fixed.index["rebuilt"]):
                click.echo(
                    f"index: {'rebuilt' if fixed.index['rebuilt'] else 'reindexed'} "
                    f"{len(fixed.index['reindexed'])} days"
                )
    if as_json:
        emit_json({**rep.to_json(), **({"repair": fixed.to_json()} if fixed else {})})
    else:
        for line in rep.damage:
            click.echo(f"DAMAGE  {line}")
        for line in rep.warnings:
            click.echo(f"warning {line}")
        for line in rep.notes:
            click.echo(f"keys    {line}")
        for line in rep.unchecked:
            click.echo(f"not checked: {line}")
        files = (
            f"{rep.packs} packs" if rep.packs or not rep.segments else f"{rep.segments} segments"
        )
        hidden = (
            f", {rep.others_private} private lines of other writers (not yours to read)"
            if rep.others_private
            else ""
        )
        click.echo(
            f"{('form ok (not opened)' if rep.unchecked else 'ok') if rep.ok else 'damaged'}: "
            f"{rep.records} {'sealed record lines' if rep.unchecked else 'records'}{hidden}, "
            f"{files}, "
            f"{len(rep.damage)} problems, {len(rep.warnings)} warnings"
        )
    if not rep.ok:
        raise SystemExit(1)
    if rep.unchecked:
        raise SystemExit(10)


@click.command("index")
@click.option("-n", "--dry-run", is_flag=True, help="Print the plan without doing it.")
@click.option("-B", "--rebuild", is_flag=True, help="Rebuild everything from the files.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.pass_obj
def index_cmd(obj, dry_run, rebuild, as_json):
    """Bring the disposable search index up to date (only the days whose files changed).

    Example: ct index -n
    """
    from .common import progress_for

    with progress_for(obj, "Indexing days") as bar:
        plan = obj.store().index(rebuild=rebuild, dry_run=dry_run, progress=bar).last_plan
    if as_json:
        emit_json({**plan.to_json(), "dry_run": dry_run})
        return
    verb = "would" if dry_run else "did"
    if plan.empty:
        click.echo("index is up to date")
        return
    for day in plan.changed:
        click.echo(f"{verb} reindex {day}")
    for day in plan.vanished:
        click.echo(f"{verb} drop    {day}")
    if plan.touched:
        click.echo(f"{verb} refresh fingerprints of {len(plan.touched)} unchanged days")


@click.group("hooks")
def hooks_cmd():
    """Install, remove or inspect the git hooks that keep the index fresh."""


@hooks_cmd.command("install")
@click.pass_obj
def hooks_install(obj):
    """Install the hook stubs: they refresh the index after git changes files (an optional speed-up),
    remove what a merge brought back of forgotten records, and refuse a push that would carry it.

    On a bare repository (ct -C REMOTE.git hooks install) it installs the remote's guard instead: a
    pre-receive hook that refuses pushes bringing back forgotten records, conflict markers or files
    memstore cannot read (it needs memstore or ct on the server's PATH)."""
    from ..store import Store

    bare = _bare_target(obj)
    if bare is not None:
        names = Store.install_guard(bare)
        click.echo("installed: " + ", ".join(names) + f" (the guard of the shared remote {bare})")
        return
    names = obj.store().hooks("install")
    click.echo("installed: " + ", ".join(names))


def _bare_target(obj):
    """The -C path when it is a bare git repository (a shared remote), else None."""
    from ..store import Store

    return Store.bare_remote(obj.store_paths[0]) if len(obj.store_paths) == 1 else None


@hooks_cmd.command("uninstall")
@click.pass_obj
def hooks_uninstall(obj):
    """Remove memstore's hook stubs (restoring hooks they replaced)."""
    names = obj.store().hooks("uninstall")
    click.echo("removed: " + (", ".join(names) or "nothing"))


@hooks_cmd.command("status")
@click.pass_obj
def hooks_status(obj):
    """Show each hook's state."""
    for name, state in obj.store().hooks("status").items():
        click.echo(f"{name:14} {state}")


@click.command("log")
@click.option(
    "-n",
    "max_count",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many commits.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def log_cmd(obj, max_count, as_json):
    """Show the memory's history from git: commit, date, message, what changed, who committed it
    and, for a signed commit (git's SSH or GPG signing), whether git verifies the signature.

    Example: ct log -n 5
    """
    entries = obj.store().log(max_count=max_count)
    if as_json:
        emit_json(entries)
        return
    for e in entries:
        counts = e["counts"]
        summary = ", ".join(f"{k} +{v}" for k, v in counts.items() if v) or "no record changes"
        sig = e.get("signature")
        signed = (
            ""
            if sig is None
            else f", signed, verified ({sig['signer'] or sig['key']})"
            if sig["verified"]
            else f", signed, NOT verified: {sig['why']}"
        )
        click.echo(
            f"{e['sha'][:10]} {e['date'][:16].replace('T', ' ')} {e['subject']}  [{summary}]"
            f"  {e['author']}{signed}"
        )


@click.command("reembed")
@click.option(
    "--embedder", default=None, help="Switch to this embedder (default: the store's own)."
)
@click.option("--dim", type=int, default=None, help="Vector size (hash and openai embedders).")
@click.option("--model", default=None, help="Model name (openai embedder).")
@click.pass_obj
def reembed_cmd(obj, embedder, dim, model):
    """Re-embed every record (one new pack per day replaces the old ones; one commit).

    Example: ct reembed --embedder hash
    """
    res = obj.store().reembed(embedder, dim=dim, model=model)
    obj.say(
        f"Re-embedded {res['records']} records with {res['model']} ({res['dim']}-d)"
        + (f"; commit {res['commit'][:10]}" if res["commit"] else "")
    )


@click.command("gc")
@click.option("-n", "--dry-run", is_flag=True, help="Show what would be done; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def gc_cmd(obj, dry_run, as_json):
    """Consolidate each day's small packs, and drop the identical copies of record lines that
    git merges leave (one commit).

    Packs are merged only while none is over 45% of the result, so a day keeps a few packs of
    growing size (a day whose packs repeat each other, after two clones consolidated it, is merged
    whole). Every pack's bytes are unique, so git never takes one for a rename of another and
    clones that consolidate differently merge with plain git. Example: ct gc -n
    """
    res = obj.store().gc(dry_run=dry_run)
    if as_json:
        emit_json(res.to_json())
    elif not res.days and not res.damaged and not res.duplicates:
        click.echo(
            "Nothing to consolidate: no day has small packs to merge (packs of similar size stay apart, "
            "so a big pack is not rewritten for a small one), and no record line is repeated."
        )
    else:
        said = []
        if res.days or not res.duplicates:
            said.append(f"{'Would consolidate' if dry_run else 'Consolidated'} {res.packs()}")
        if res.duplicates:
            said.append(
                f"{'would drop' if dry_run else 'dropped'} {res.copies()} ({', '.join(res.logs)})"
            )
        text = "; ".join(said)
        click.echo(
            text[0].upper() + text[1:] + (f"; commit {res.commit[:10]}" if res.commit else "")
        )
    for day in res.damaged:
        click.echo(f"left {day} as it is: one of its packs is damaged (run ct fsck)", err=True)


@click.command("hook")
@click.argument("name")
@click.argument("args", nargs=-1)
@click.pass_obj
def hook_cmd(obj, name, args):
    """Run by the git hook stubs: refresh the index; the guards (pre-push, pre-receive) exit 1 to
    refuse a push. Otherwise never fails the git command."""
    import os
    import sys

    from ..store import Store

    if name == "pre-receive":  # in a bare remote: no store, only its git folder
        _guard_remote(Path(os.environ.get("GIT_DIR") or "."))
        return
    try:
        Store.before_hook(name, obj.store_paths[0] if obj.store_paths else ".")
        said = obj.store().hooks("run", name, args, stdin=sys.stdin if name == "pre-push" else None)
    except Exception as exc:  # a hook must never block git
        if name == "pre-push":
            click.echo(
                f"memstore guard: could not check this push ({exc}); pushed unchecked", err=True
            )
        return
    if name == "pre-push" and said:
        _refuse(said, "pre-push")
    for line in said:
        click.echo(line, err=True)


def _guard_remote(gdir) -> None:
    """The pre-receive guard: refuse the whole push (exit 1) when a pushed tip has a problem, or
    when it cannot be checked."""
    import sys

    from ..store import Store

    try:
        problems = Store.check_push(gdir, sys.stdin.read().splitlines())
    except Exception as exc:
        click.echo(f"memstore guard: could not check this push ({exc}): refused", err=True)
        raise SystemExit(1) from None
    if problems:
        _refuse(problems, "pre-receive")


def _refuse(problems: list[str], where: str) -> None:
    shown = problems[:20] + ([f"… and {len(problems) - 20} more"] if len(problems) > 20 else [])
    click.echo(f"memstore guard ({where}): push refused:\n  " + "\n  ".join(shown), err=True)
    raise SystemExit(1)


@click.command("sync")
@click.option("--no-push", is_flag=True, help="Only fetch, merge and reindex.")
@click.option(
    "--set-upstream",
    "set_upstream",
    metavar="REMOTE",
    default=None,
    help="Push this branch to REMOTE and track it (first sync of a new store).",
)
@click.option(
    "--drop-purged",
    is_flag=True,
    help="Move a branch holding commits --purge-history removed (a plain git pull merged them back) onto the "
    "upstream, keeping this clone's records, then expire the reflog and prune.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def sync_cmd(obj, no_push, set_upstream, drop_purged, as_json):
    """Merge the remote's memory into this clone, reindex, and push (one merge commit at most).

    Example: ct sync
    """
    res = obj.store().sync(push=not no_push, set_upstream=set_upstream, drop_purged=drop_purged)
    if as_json:
        emit_json(res.to_json())
        return
    for note in res.notes:
        obj.say(note)
    parts = [f"merged {res.merged} commits" if res.merged else "nothing new from " + res.upstream]
    if not no_push:
        parts.append(
            f"pushed {res.pushed} commit{'s' if res.pushed != 1 else ''}"
            if res.pushed
            else "nothing to push"
        )
    if res.reindexed:
        parts.append(f"reindexed {len(res.reindexed)} days")
    obj.say(f"sync with {res.upstream}: " + ", ".join(parts))


@click.command("upgrade")
@click.option("-n", "--dry-run", is_flag=True, help="Print the plan without changing anything.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan or result as JSON.")
@click.pass_obj
def upgrade_cmd(obj, dry_run, as_json):
    """Turn a format-1 or format-2 store into format 3 in one commit, losslessly.

    Same records, each with a key of its own added (format 1: less its `seg` field), same vectors
    bit for bit, sealed under those keys in one pack per day; format 1: tree.json becomes the tree
    log and segments/ is removed. A format-3 store is left alone.

    Example: ct upgrade -n
    """
    res = obj.store().upgrade(dry_run=dry_run)
    if as_json:
        emit_json(res.to_json())
        return
    for line in res.lines():
        click.echo(line)


@click.group("export")
def export_cmd():
    """Write the store in another tool's format (the store itself is not changed)."""


@export_cmd.command("contexttape")
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def export_contexttape_cmd(obj, dest, as_json):
    """A classic ContextTape store in DEST: one segment_<n>.is per text and per vector, linked in pairs.

    ContextTape's ISStore/MultiStore opens DEST and ranks the same vectors as `ct search --mode
    vector` (superseded records are left out). DEST must be new or empty.

    Example: ct export contexttape /tmp/tape
    """
    st = obj.store(index=True)
    with progress_for(obj, "Exporting") as bar:
        res = st.export("contexttape", dest, progress=bar)
    if as_json:
        emit_json(res)
        return
    click.echo(
        f"Exported {res['pairs']} text/vector pairs to {res['dir']}"
        + (
            f" ({res['skipped']} records without a readable vector left out)"
            if res["skipped"]
            else ""
        )
    )
