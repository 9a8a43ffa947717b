"""Topic commands: tree, context, chat, reorganize and diff."""

from __future__ import annotations

import click

from .common import emit_json, secret_options


@click.command("tree")
@click.option("--depth", type=click.IntRange(1, None), default=None, help="Show only this many levels.")
@click.option("--format", "fmt", type=click.Choice(["text", "mermaid", "dot"]), default="text", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the tree as nested JSON.")
@click.option("--no-summaries", is_flag=True, help="Names only.")
@click.option(
    "--place-existing",
    is_flag=True,
    help="First place every conversation record the tree does not hold yet (one commit).",
)
@click.pass_obj
def tree_cmd(obj, depth, fmt, as_json, no_summaries, place_existing):
    """Show the topic tree (* marks the current topic, + its ancestors).

    Example: ct tree --depth 2
    """
    from ..format import tree as treefmt
    from ..tree import render

    store = obj.store()
    if place_existing:
        from ..tree.assign import place_existing as place

        placed = {"n": 0}
        with store.transaction(lambda: f"Place {placed['n']} existing conversation records in the topic tree") as tx:
            paths, placed["n"] = place(store)
            tx.stage(paths)
        n = placed["n"]
        obj.say(f"Placed {n} records.")
    tree = treefmt.read(store.root)
    if as_json:
        emit_json(render.as_json(tree, depth))
    elif fmt == "mermaid":
        click.echo(render.mermaid(tree, depth))
    elif fmt == "dot":
        click.echo(render.dot(tree, depth))
    else:
        click.echo(render.text(tree, store.tz, depth, summaries=not no_summaries))


@click.command("context")
@click.argument("query")
@click.option(
    "--budget",
    type=click.IntRange(1, None),
    default=None,
    help="At most this many tokens (counted with the store's embedder tokenizer).",
)
@click.option("-k", "--topk", default=8, show_default=True, type=click.IntRange(0, 200), help="Recalled lines at most.")
@click.option(
    "--recent",
    default=6,
    show_default=True,
    type=click.IntRange(0, 200),
    help="Recent turns of the latest session (0: none, e.g. when the host already sends history).",
)
@click.option("--json", "as_json", is_flag=True, help="Print {query, budget, tokens, sections, text}.")
@click.pass_obj
def context_cmd(obj, query, budget, topk, recent, as_json):
    """Build prompt context for QUERY: markers, topic paths, recalled lines, recent turns.

    Example: ct context "what cake for Sarah's party" --budget 800
    """
    from ..tree.context import build_context

    store = obj.store(index=True)
    ctx = build_context(store, query, budget=budget, k=topk, recent=recent)
    if as_json:
        emit_json(ctx.to_json())
    elif ctx.text:
        click.echo(ctx.text)
    else:
        obj.say("Nothing relevant found.")


@click.command("chat")
@click.option("--once", "once", default=None, metavar="TEXT", help="Ask one question, print the answer, exit.")
@click.option("--session", default=None, help="Session name for the stored turns (default chat-<time>).")
@click.option(
    "--budget",
    default=1500,
    show_default=True,
    type=click.IntRange(50, None),
    help="Token budget of the memory context in each prompt.",
)
@click.option(
    "--verbose", "debug", is_flag=True, help="Write each turn's hits, context and prompt to .memstore/chat-debug/."
)
@secret_options("Store turns")
@click.option("--json", "as_json", is_flag=True, help="With --once: print the turn as JSON.")
@click.pass_obj
def chat_cmd(obj, once, session, budget, debug, secrets, as_json):
    """Chat with memory: answers from an OpenAI-compatible LLM (OPENAI_BASE_URL), turns stored.

    Example: ct chat --once "What did we decide about the trip budget?"
    """
    from ..chat import ChatSession
    from ..errors import SecretsFound

    store = obj.store(index=True)
    chat = ChatSession(store, session=session, budget=budget, verbose=debug, secrets=secrets)
    if once is not None:
        turn = chat.ask(once)
        if as_json:
            emit_json(turn.to_json())
        else:
            _show(obj, turn)
        if turn.error:
            raise SystemExit(1)
        return
    obj.say(f"Chatting in session {chat.session} (model {chat.llm.model}). Empty line or Ctrl-D to quit.")
    while True:
        try:
            text = click.prompt("you", prompt_suffix="> ", default="", show_default=False)
        except (EOFError, click.Abort):
            break
        if not text.strip():
            break
        try:
            _show(obj, chat.ask(text))
        except SecretsFound as exc:  # the session goes on; that turn was neither sent nor stored
            obj.say(str(exc))


def _show(obj, turn) -> None:
    if turn.reply is not None:
        click.echo(turn.reply)
    else:
        click.echo(f"Error: {turn.error}\nYour message was stored; no answer was stored.", err=True)
    for f in turn.debug_files:
        obj.say(f"debug: {f}")


@click.command("reorganize")
@click.option("-n", "--dry-run", is_flag=True, help="Show what would change; change nothing.")
@click.option(
    "--threshold",
    type=click.FloatRange(-1, 1),
    default=0.55,
    show_default=True,
    help="Minimum cosine similarity of two topics to consider merging them.",
)
@click.option("--prune-trivial", is_flag=True, help="Archive trivial exchanges (under 20 words both sides).")
@click.option("--offline", is_flag=True, help="Use the offline veto even when an LLM is configured.")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.pass_obj
def reorganize_cmd(obj, dry_run, threshold, prune_trivial, offline, as_json):
    """Merge related frozen topics (older absorbs newer) and archive trivial turns: one commit.

    Example: ct reorganize -n --prune-trivial
    """
    from ..tree.reorganize import reorganize

    store = obj.store(index=True)
    res = reorganize(store, threshold=threshold, prune_trivial=prune_trivial, dry_run=dry_run, offline=offline)
    if as_json:
        emit_json(res.to_json())
        return
    click.echo(
        res.message()
        if res.changed
        else f"Nothing to reorganize ({res.candidates} frozen topics, {res.pairs} pairs at >= {threshold}, "
        f"{len(res.vetoed)} vetoed)."
    )
    if res.changed:
        click.echo("(dry run: nothing changed)" if dry_run else f"Committed {res.commit[:12]}." if res.commit else "")


@click.command("diff")
@click.argument("revs", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
@click.pass_obj
def diff_cmd(obj, revs, as_json):
    """Explain how the topic tree changed: merged, moved, renamed, archived topics.

    No REV: HEAD against the working tree; one REV: REV against it; two: the first against the second.
    Example: ct diff HEAD~1
    """
    from ..tree.diff import tree_diff

    if len(revs) > 2:
        raise click.UsageError("give at most two revisions")
    store = obj.store()
    d = tree_diff(store, *revs)
    if as_json:
        emit_json(d.to_json())
        return
    click.echo(f"topic tree {d.old_label} -> {d.new_label}")
    for line in d.lines():
        click.echo("  " + line)
