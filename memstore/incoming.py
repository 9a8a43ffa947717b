"""What `ct sync` checks before it merges an encrypted store's remote: every line the remote
adds to a sealed file, where this clone holds the key it names, opens (docs/security.md).

A line that fails there was not sealed by a reader of the store (anyone who can push can write
one), and once merged it stopped every command on the clone, naming it, until someone reverted
the commit by hand. Sync refuses the merge instead and names the file, line and commit; nothing
changes. Lines of epochs this clone does not open (or does not trust) and other writers' private
lines cannot be checked here and are left to their readers. A plain `git pull` does not check.
"""

from __future__ import annotations

import re

from .format import layout, sealed_lines
from .gitrepo import RevReader, git_dir


def forged_lines(
    store, theirs: str, limit: int = 20, sealer=None, whole: bool = False
) -> list[str]:
    """Lines `theirs` adds to sealed files (since its merge base with HEAD; `whole`: every line
    of its files, for a rewritten history) that do not open under the key they name, or that are
    not sealed at all: one message each, at most `limit`. `sealer`: the keys to check with (the
    store's own by default)."""
    sealer = sealer or store.sealer
    if sealer is None:
        return []
    git = store.git
    base = None
    if not whole:
        try:
            base = git.run("merge-base", "HEAD", theirs).strip() or None
        except Exception:  # no common history: everything is new
            base = None
    reader = RevReader(git_dir(store.root))
    line_file = re.compile(layout.SEALED_LINE_FILES)
    paths = [p for p in reader.changed_paths(base, theirs) if line_file.match(p)]
    if not paths:
        return []
    olds = reader.blobs(base, paths) if base else [None] * len(paths)
    out: list[str] = []
    for rel, new, old in zip(paths, reader.blobs(theirs, paths), olds):
        if new is None:
            continue
        had = set((old or b"").split(b"\n"))
        lines = new.split(b"\n")
        for n, raw in enumerate(lines, 1):
            if not raw or raw in had:
                continue
            why = _why_not(sealer, rel, raw, last=n == len(lines))
            if why:
                out.append(f"{rel}:{n}: {why}{_commit(git, theirs, rel)}")
                if len(out) >= limit:
                    return out
    return out


def _why_not(sealer, rel: str, raw: bytes, last: bool) -> str | None:
    parsed = sealed_lines.parse(raw)
    if parsed is not None:
        epoch, ct = parsed
        key = sealer.keys.get(epoch)
        if key is None:
            return None
        plain = sealed_lines.open_one(key, epoch, rel, ct)
        if plain is None:
            return f"a line sealed under key epoch {epoch} that its key does not open (forged or damaged)"
        if rel.startswith("log/") and sealed_lines.is_private_line(plain):
            return (
                "a record labelled private, sealed under the shared key (memstore seals private "
                "records under their writer's own key: another reader made it)"
            )
        return None
    private = sealed_lines.parse_private(raw)
    if private is not None:
        kid, ct = private
        key = sealer.private.get(kid)
        if key is None or sealed_lines.open_private(key, kid, rel, ct) is not None:
            return None
        return f"a private line under your key {kid} that it does not open (forged or damaged)"
    if last:
        return "a last line without its newline (an unfinished write)"
    return "not a sealed line, in an encrypted store (no reader of the store wrote it)"


def _commit(git, theirs: str, rel: str) -> str:
    try:
        who = git.run("log", "-1", "--format=%h by %an <%ae>", theirs, "--", rel).strip()
    except Exception:
        return ""
    return f" (last changed in commit {who})" if who else ""
