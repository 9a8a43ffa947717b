"""`ct forget`: remove records from every committed file (one commit), optionally from git history;
`ct share`: make private records shared (one commit), after showing what will be shared."""

from __future__ import annotations

import click

from .common import emit_json, one_line


@click.command("forget")
@click.argument("ids", nargs=-1)
@click.option(
    "--match",
    "match",
    default=None,
    metavar="QUERY",
    help="Records whose text holds every word of QUERY.",
)
@click.option("--session", default=None, help="Every record of this session.")
@click.option(
    "--commit",
    "commit",
    default=None,
    metavar="REV",
    help="Every record that commit REV added (an import or a write to undo; `ct log` lists them).",
)
@click.option(
    "--since", default=None, help="Records from this time on (ISO or a phrase like 'yesterday')."
)
@click.option("--until", default=None, help="Records up to this time.")
@click.option("--now", default=None, help="Reference time for phrases (default: now).")
@click.option("-n", "--dry-run", is_flag=True, help="Only list what would be forgotten.")
@click.option(
    "--purge-history",
    is_flag=True,
    help="Also rewrite git history (git-filter-repo) so no commit holds the text; needs a force push.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def forget_cmd(
    obj, ids, match, session, commit, since, until, now, dry_run, purge_history, as_json
):
    """Forget records: by ID, --match QUERY, --session, --commit or --since/--until (combined: all must hold).

    One commit removes their text from the day logs, vectors, topic tree and markers, and adds a
    tombstone (id and hash, never the text) to forgotten.jsonl so a merge with a clone that still
    has them does not bring them back. Commit messages and older commits keep the text until
    --purge-history rewrites history. Preview with -n first.

    Example: ct forget --match "hunter2" -n
    """
    st = obj.store()
    res = st.forget(
        ids,
        match=match,
        session=session,
        since=since,
        until=until,
        now=now,
        commit=commit,
        dry_run=dry_run,
        purge_history=purge_history,
    )
    if as_json:
        emit_json({**res.to_json(), "dry_run": dry_run})
        return
    for r in res.records:
        text = (
            one_line(r["text"], 80)
            if r["text"] is not None
            else f"({r.get('note') or 'in no day log; named by the topic tree'})"
        )
        when = r["ts"][:16].replace("T", " ") or "-"
        click.echo(f"{when}  {r['id']}  {r.get('session') or '-'}  {text}")
    if dry_run:
        obj.say(f"would forget {len(res.records)} records (dry run; nothing changed)")
        return
    for note in res.notes:
        obj.say(note)
    if res.commit:
        obj.say(f"forgot {len(res.records)} records; commit {res.commit[:10]}")


@click.command("share")
@click.argument("ids", nargs=-1)
@click.option("-n", "--dry-run", is_flag=True, help="Only show what would be shared.")
@click.option("-y", "--yes", is_flag=True, help="Share without asking (no prompt on a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def share_cmd(obj, ids, dry_run, yes, as_json):
    """Make private records (by ID) shared with the team, in one commit.

    ct share -n with no ID lists every private record you can read (the review queue). First shows exactly what will be shared: each record's text, with the secrets the scanner
    flags. On a terminal it then asks; --yes skips the question, and without a terminal --yes
    is needed. In an encrypted store each line is sealed again to the team's key (docs/format.md,
    "Private lines"); in a plain store only its label changes.

    Example: ct share 01jf3x2c9k8m4q7w5e6r1t0y2u -n
    """
    import sys

    st = obj.store()
    if not ids and not dry_run:
        raise click.UsageError("give the IDs to share (ct share -n lists your private records)")
    plan = st.share(ids, dry_run=True)
    if as_json and (dry_run or not plan.records):
        emit_json(plan.to_json())
        return
    if not as_json:
        _show_share(plan)
    if dry_run or not plan.records:
        obj.say(
            f"would share {len(plan.records)} records (dry run; nothing changed)"
            if dry_run
            else "nothing to share; no commit"
        )
        return
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("not a terminal: give --yes to share without the question")
        flagged = f", {plan.secrets} flagged as secrets" if plan.secrets else ""
        if not click.confirm(
            f"Share these {len(plan.records)} records with everyone who reads {st.root}{flagged}?",
            err=True,
        ):
            obj.say("nothing shared")
            return
    res = st.share([r["id"] for r in plan.records])
    if as_json:
        emit_json(res.to_json())
        return
    for note in res.notes:
        obj.say(note)
    obj.say(f"shared {len(res.records)} records; commit {(res.commit or '-')[:10]}")


def _show_share(plan) -> None:
    for r in plan.records:
        when = r["ts"][:16].replace("T", " ")
        click.echo(f"{when}  {r['id']}  {r.get('actor') or r['role']}")
        for line in r["text"].splitlines() or [""]:
            click.echo(f"    {line}")
        for f in r["secrets"]:
            click.echo(f"    ! secret ({f['kind']}) on line {f['line']}: {f['excerpt']}")
    for note in plan.notes:
        click.echo(note, err=True)
