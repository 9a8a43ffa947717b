"""Commands that write records or markers: add, mark, ingest-path, ingest-any, import, build-wiki.

Each makes one commit (none when nothing changed)."""

from __future__ import annotations

import click

from .common import emit_json, one_line, progress_for, read_text_arg, secret_options


def report(obj, res, as_json: bool, what: str) -> None:
    if as_json:
        emit_json(res.to_json())
        return
    for note in res.notes:
        obj.say(note)
    if res.commit:
        obj.say(
            f"{what}: added {len(res.added)} records"
            + (f", {res.skipped} already present" if res.skipped else "")
            + f"; commit {res.commit[:10]}"
        )
    else:
        obj.say(
            f"{what}: nothing new"
            + (f" ({res.skipped} already present)" if res.skipped else "")
            + "; no commit"
        )


@click.command("add")
@click.argument("text")
@click.option("--role", default="user", show_default=True, help="user | assistant | system | tool")
@click.option("--actor", default=None, help="Who said it (default: the role).")
@click.option("--session", default=None, help="Conversation/session name.")
@click.option("--ts", default=None, help="When it was said (ISO; default: now).")
@click.option("--type", "type_", default="text", show_default=True, help="text | action | meta")
@click.option("--model", default=None, help="Model that produced it (assistant turns).")
@click.option(
    "--scope",
    type=click.Choice(["private", "shared"]),
    default=None,
    help="private: readable by you only (sealed to your key in an encrypted store; only a label "
    "in a plain one); shared: the team's. Default: the store's [settings] scope (shared).",
)
@click.option("--private", "scope", flag_value="private", help="Same as --scope private.")
@secret_options("Add")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def add_cmd(obj, text, role, actor, session, ts, type_, model, scope, as_json, secrets):
    """Add one conversation turn (TEXT, or - to read stdin).

    Example: ct add --role assistant --session planning "We settled on a 40k budget."
    """
    from ..errors import UsageError

    if type_ not in ("text", "action", "meta"):
        raise UsageError(
            f"--type must be text, action or meta, not {type_!r} (documents come in with ingest-path)"
        )
    res = obj.store().add(
        read_text_arg(text),
        role=role,
        actor=actor,
        session=session,
        ts=ts,
        type=type_,
        model=model,
        secrets=secrets,
        scope=scope,
    )
    report(obj, res, as_json, "add")


@click.command("mark")
@click.argument("text", required=False)
@click.option(
    "--done",
    "done_id",
    default=None,
    metavar="ID",
    help="Close the open marker ID (or an unambiguous prefix).",
)
@click.option(
    "--redact-secrets", is_flag=True, help="Replace each detected secret by [REDACTED <kind>]."
)
@click.option(
    "--allow-secrets",
    is_flag=True,
    help="Keep verbatim even what looks like credentials (the commit subject is masked).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the marker as JSON.")
@click.pass_obj
def mark_cmd(obj, text, done_id, redact_secrets, allow_secrets, as_json):
    """Set a "where are we now" marker (one commit), or close one with --done ID.

    Example: ct mark "budget: waiting for Ana's numbers"
    """
    if bool(text) == bool(done_id):
        raise click.UsageError("give either TEXT (a new marker) or --done ID (close one)")
    if redact_secrets and allow_secrets:
        from ..errors import UsageError

        raise UsageError("--allow-secrets and --redact-secrets exclude each other; pass one.")
    how = "allow" if allow_secrets else "redact" if redact_secrets else "refuse"
    m = obj.store().mark(text, done=done_id, secrets=how)
    if as_json:
        emit_json(m.to_json())
    elif done_id:
        obj.say(f"closed marker {m.id}: {one_line(m.text, 100)}")
    else:
        obj.say(f"marker {m.id}: {one_line(m.text, 100)}")


def exclude_options(f):
    """--exclude GLOB (repeatable) and --no-default-excludes, for ingest-path and ingest-any."""
    f = click.option(
        "--no-default-excludes",
        "default_excludes",
        is_flag=True,
        flag_value=False,
        default=True,
        help="Read build output, caches and Sphinx scaffolding too (see --exclude).",
    )(f)
    return click.option(
        "--exclude",
        "exclude",
        multiple=True,
        metavar="GLOB",
        help="Leave out what matches this gitignore pattern, relative to PATH (_build/, *.html, "
        "docs/conf.py; !GLOB takes one back). Repeatable. By default _build/ build/ dist/ "
        "_templates/ _static/ node_modules/ .tox/ .venv/ venv/ __pycache__/ and other caches are "
        "left out, and a Sphinx conf.py, Makefile and make.bat. What is left out is counted.",
    )(f)


@click.command("ingest-path")
@click.argument("path", type=click.Path(exists=True))
@click.option(
    "--exts", default=None, help="Comma-separated extensions to read (replaces the default list)."
)
@click.option(
    "--max-bytes",
    type=int,
    default=10 * 1024 * 1024,
    show_default=True,
    help="Skip (never truncate) files larger than this.",
)
@click.option(
    "--max-pdf-pages", type=int, default=None, help="Read at most this many pages of each PDF."
)
@click.option("--follow-symlinks", is_flag=True, help="Follow symbolic links (loops are detected).")
@click.option("--quantize", is_flag=True, help="Store this ingest's vectors as int8.")
@exclude_options
@secret_options("Ingest")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def ingest_path_cmd(
    obj,
    path,
    exts,
    max_bytes,
    max_pdf_pages,
    follow_symlinks,
    quantize,
    exclude,
    default_excludes,
    secrets,
    as_json,
):
    """Ingest a file or folder as document chunks (idempotent; changed files supersede old chunks).

    Example: ct ingest-path docs/ --exts .md,.rst --exclude changelog.rst
    """
    st = obj.store()
    ext_set = (
        {e.strip() if e.strip().startswith(".") else "." + e.strip() for e in exts.split(",")}
        if exts
        else None
    )
    with progress_for(obj, "Embedding chunks") as bar:
        res = st.ingest_path(
            path,
            exts=ext_set,
            max_bytes=max_bytes,
            max_pdf_pages=max_pdf_pages,
            follow_symlinks=follow_symlinks,
            quantize=quantize,
            secrets=secrets,
            progress=bar,
            verbose=obj.verbose,
            exclude=exclude,
            default_excludes=default_excludes,
        )
    report(obj, res, as_json, "ingest-path")


@click.command("ingest-any")
@click.argument("path", type=click.Path(exists=True))
@click.option(
    "--max-bytes",
    type=int,
    default=None,
    help="Skip (never truncate) files larger than this. Default: 100 MiB.",
)
@click.option("--follow-symlinks", is_flag=True, help="Follow symbolic links (loops are detected).")
@exclude_options
@secret_options("Ingest")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def ingest_any_cmd(
    obj, path, max_bytes, follow_symlinks, exclude, default_excludes, secrets, as_json
):
    """Ingest any files: text and code as chunks (like ingest-path); PDFs as text plus the original;
    images, audio, video and other files kept whole as a blob segment with a JSON manifest and a
    searchable description (name, size, type, image size and date, audio duration). One commit.

    Example: ct ingest-any ~/Pictures/whiteboards
    """
    st = obj.store()
    with progress_for(obj, "Ingesting") as bar:
        res = st.ingest_any(
            path,
            max_bytes=max_bytes,
            follow_symlinks=follow_symlinks,
            secrets=secrets,
            progress=bar,
            exclude=exclude,
            default_excludes=default_excludes,
        )
    report(obj, res, as_json, "ingest-any")


@click.command("build-wiki")
@click.option(
    "--topics-file",
    required=True,
    type=click.Path(dir_okay=False),
    help="Article titles, one per line ('#' starts a comment).",
)
@click.option("--limit", type=int, default=None, help="Fetch only the first N titles.")
@click.option(
    "--min-chars",
    type=int,
    default=0,
    show_default=True,
    help="Skip articles with less text than this.",
)
@click.option(
    "--base-url",
    default="https://en.wikipedia.org/wiki/",
    show_default=True,
    help="Where articles live; the title is appended.",
)
@click.option(
    "--timeout", type=float, default=15.0, show_default=True, help="Seconds to wait for each page."
)
@secret_options("Ingest pages")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def build_wiki_cmd(obj, topics_file, limit, min_chars, base_url, timeout, secrets, as_json):
    """Fetch Wikipedia articles over HTTP, strip them to text and ingest them as document chunks
    (one commit; re-running adds only what changed). A page that cannot be fetched is skipped
    with a message, never stored.

    Example: ct build-wiki --topics-file topics.txt --limit 20 --min-chars 500
    """
    st = obj.store()
    with progress_for(obj, "Embedding chunks") as bar:
        res = st.build_wiki(
            topics_file,
            limit=limit,
            min_chars=min_chars,
            base_url=base_url,
            timeout=timeout,
            secrets=secrets,
            progress=bar,
            verbose=obj.verbose,
        )
    report(obj, res, as_json, "build-wiki")


@click.group("import")
def import_cmd():
    """Import conversations (jsonl, claude-code, chatgpt, trace, lossless-memory) or a ContextTape store.

    Every import is idempotent: records already in the store are skipped.
    """


def _import(obj, kind, path, as_json, secrets="refuse", **opts):
    st = obj.store()
    with progress_for(obj, f"Importing {kind}") as bar:
        res = st.import_(kind, path, progress=bar, secrets=secrets, **opts)
    report(obj, res, as_json, f"import {kind}")


_common = [
    secret_options("Import"),
    click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
]


def _with_common(f):
    for opt in reversed(_common):
        f = opt(f)
    return f


@import_cmd.command("jsonl")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@_with_common
@click.pass_obj
def import_jsonl(obj, file, secrets, as_json):
    """One JSON object per line with ts, role, text (+ actor, session, id, model, type, anything else).

    Example: ct import jsonl turns.jsonl
    """
    _import(obj, "jsonl", file, as_json, secrets)


@import_cmd.command("claude-code")
@click.argument("path", type=click.Path(exists=True))
@_with_common
@click.pass_obj
def import_claude(obj, path, secrets, as_json):
    """Claude Code transcripts: a session .jsonl or a folder of them (e.g. ~/.claude/projects).

    Example: ct import claude-code ~/.claude/projects
    """
    _import(obj, "claude-code", path, as_json, secrets)


@import_cmd.command("chatgpt")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@_with_common
@click.pass_obj
def import_chatgpt(obj, file, secrets, as_json):
    """ChatGPT's export (conversations.json): each conversation's current branch.

    Example: ct import chatgpt conversations.json
    """
    _import(obj, "chatgpt", file, as_json, secrets)


@import_cmd.command("trace")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@_with_common
@click.pass_obj
def import_trace_cmd(obj, file, secrets, as_json):
    """A TRACE save (trace-memory): its turns as records, its topics into the topic tree.

    The file must have been saved with its conversation (save_conversation=True); messages are
    dated by their topic's creation time (TRACE keeps no per-message time) and marked ts_approx.

    Example: ct import trace session.json
    """
    _import(obj, "trace", file, as_json, secrets)


@import_cmd.command("lossless-memory")
@click.argument("folder", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--source-timezone",
    default=None,
    metavar="TZ",
    help="Timezone of times written without an offset (older lossless-memory data: Asia/Tokyo). Default: the store's.",
)
@_with_common
@click.pass_obj
def import_lossless_cmd(obj, folder, source_timezone, secrets, as_json):
    """lossless-memory's data folder: main/YYYY-MM-DD.jsonl and corpus/<name>/*.jsonl.

    Example: ct import lossless-memory ~/lossless-memory/data --source-timezone Asia/Tokyo
    """
    _import(obj, "lossless-memory", folder, as_json, secrets, source_timezone=source_timezone)


@import_cmd.command("contexttape")
@click.argument("folder", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--model",
    default=None,
    help="The model that made the store's vectors; they are kept when it is this store's model "
    "(same dimension). Default: re-embed every text.",
)
@_with_common
@click.pass_obj
def import_contexttape_cmd(obj, folder, model, secrets, as_json):
    """A ContextTape store: a folder of segment_<n>.is files, or a folder of such folders.

    Each text/vector pair becomes a record dated by its segment header; orphans are reported.

    Example: ct import contexttape data/ --model sentence-transformers/all-MiniLM-L6-v2
    """
    _import(obj, "contexttape", folder, as_json, secrets, model=model)
