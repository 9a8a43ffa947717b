"""`ct keys`: identities and the recipients of an encrypted store (docs/security.md)."""

from __future__ import annotations

import click

from .common import emit_json


@click.group("keys")
def keys_cmd():
    """Identities and recipients of encrypted stores (ct init --encrypt).

    Example: ct keys new && ct init --encrypt ~/memory
    """


@keys_cmd.command("new")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.pass_obj
def keys_new(obj, file):
    """Write a new age identity to FILE (mode 0600; default: age-identity.txt beside your
    memstore config) and print its recipient (age1…). Never overwrites a file."""
    from ..store import Store

    res = Store.keys(None, "new", path=file)
    obj.say(f"Wrote a new identity to {res['path']} (mode 0600). Its recipient:")
    click.echo(res["recipient"])


@keys_cmd.command("show")
@click.pass_obj
def keys_show(obj):
    """Print the recipient of the identity in use."""
    from ..store import Store

    click.echo(Store.keys(None, "show")["recipient"])


@keys_cmd.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def keys_list(obj, as_json):
    """List the store's recipients and key epochs."""
    res = obj.store().keys("list")
    if as_json:
        emit_json(res)
        return
    for r in res["recipients"]:
        click.echo(r)
    opened = ", ".join(map(str, res["epochs_opened"]))
    obj.say(f"key epoch {res['epoch']} (your identity opens: {opened})")
    for r in res["listed_not_readers"]:
        obj.say(
            f"{r} is listed in keys/recipients but named by no key file: it was not added by a "
            "reader and gets no key (remove the line)"
        )
    for e, why in res["untrusted"].items():
        obj.say(f"key epoch {e} opens but is NOT trusted by this clone: {why}")
    for kid in res["untrusted_private"]:
        obj.say(
            f"private key {kid} opens with your identity but carries no auth line of yours: its "
            "lines are not read as yours"
        )
    if res["gone"] is not None:
        obj.say(f"key epoch {res['gone']}, which this clone trusted, is gone from keys/")


@keys_cmd.command("trust")
@click.argument("which", nargs=-1)
@click.pass_obj
def keys_trust(obj, which):
    """Trust key epochs (numbers) or private keys (16-hex ids) that open with your identity but
    carry no vouch this clone can check: made by a memstore from before vouches, or by someone who
    can push. Look first at who committed them: git log -- keys/epoch-NNNN.age. Recorded in this
    clone's git folder; no commit.

    Example: ct keys trust 3
    """
    res = obj.store().keys("trust", which=list(which))
    for w in res["trusted"]:
        what = f"key epoch {w}" if w.isdigit() else f"private key {w}"
        obj.say(f"Trusted {what} (committed in {res['commits'][w] or 'no commit yet'}).")


@keys_cmd.command("add")
@click.argument("recipient")
@click.pass_obj
def keys_add(obj, recipient):
    """Let RECIPIENT (age1… or 'ssh-ed25519 AAAA…') read the whole store; one commit."""
    res = obj.store().keys("add", recipient)
    obj.say(f"Added {res['recipient']}: key epochs {', '.join(map(str, res['epochs']))} rewrapped.")


@keys_cmd.command("remove")
@click.argument("recipient")
@click.pass_obj
def keys_remove(obj, recipient):
    """Start a new key epoch without RECIPIENT; one commit. Records written from now on are
    sealed from it; what it could read before (its clone, git history) it keeps."""
    res = obj.store().keys("remove", recipient)
    obj.say(
        f"Removed {res['recipient']}: new writes use key epoch {res['epoch']}. It keeps what it "
        "could already read."
    )


@keys_cmd.command("rotate")
@click.option(
    "--rewrite",
    is_flag=True,
    help="Also seal every line again under the new epoch, delete the older epochs' key files and "
    "rewrite every earlier commit the same way (then force-push; see the notice).",
)
@click.pass_obj
def keys_rotate(obj, rewrite):
    """Start a new key epoch for the same recipients; one commit. Lines written from now on are
    sealed under it; older lines keep their epoch unless --rewrite."""
    res = obj.store().keys("rotate", rewrite=rewrite)
    obj.say(f"New writes use key epoch {res['epoch']}.")
    if res.get("notice"):
        click.echo(res["notice"])


@click.command("encrypt")
@click.option(
    "--recipient",
    "recipients",
    multiple=True,
    help="Another reader besides you (age1… or 'ssh-ed25519 AAAA…'); repeatable.",
)
@click.option(
    "--rewrite-history",
    is_flag=True,
    help="Also rewrite every earlier commit so no plain line or record word stays in history "
    "(then force-push; see the notice).",
)
@click.pass_obj
def encrypt_cmd(obj, recipients, rewrite_history):
    """Encrypt this plaintext store: seal every committed file to your identity and each
    --recipient, in one commit. Refuses an encrypted store or uncommitted changes.

    Example: ct encrypt --recipient age1… --rewrite-history
    """
    res = obj.store().encrypt(recipients=list(recipients), rewrite_history=rewrite_history)
    obj.say(
        f"Encrypted: {res['files']} line files sealed to {len(res['recipients'])} recipient(s) "
        f"(commit {str(res['commit'])[:10]})."
    )
    if res.get("private"):
        obj.say(
            f"{res['private']} record(s) labelled private are sealed to your own key alone: the "
            'other recipients cannot read them ("ct share ID" makes one the team\'s).'
        )
    if res.get("notice"):
        click.echo(res["notice"])
    elif not rewrite_history:
        obj.say(
            'Earlier commits still hold the plain text; "ct keys rotate --rewrite" (or ct encrypt '
            "--rewrite-history, next time) rewrites them."
        )
