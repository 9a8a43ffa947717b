"""fsck of an encrypted store that no identity of this user opens (docs/security.md, "The remote's
guard" and "Who reads"): what can be checked without a key is checked — every line of every line
file a whole sealed line of an epoch the store has, the key files and recipient lists well formed,
every pack's bytes hashing to its name and parsing — and what cannot is said, one line each.
Also, for every encrypted store: who changed `keys/recipients`, in which commit.
"""

from __future__ import annotations

from .. import keyring
from ..errors import MemstoreError
from ..format import pack as packfmt
from ..format import sealed_lines
from ..results import Report

AGE_HEADER = b"age-encryption.org/v1\n"

NOT_CHECKED = [
    "that each sealed line opens under its epoch key (a changed, forged or moved line)",
    "the records inside the lines: fields, ids, days, text hashes, duplicates",
    "the vectors and original files in the packs (sealed under keys only the lines hold)",
    "the topic tree, markers and tombstones inside their lines, and forgotten records a merge "
    "brought back",
    "the index (.memstore/)",
]


def recipients_history(store) -> list[str]:
    """One line per commit that changed keys/recipients, oldest first: who, when, what."""
    git = store.git
    try:
        log = git.run(
            "log",
            "--reverse",
            "--full-history",  # a change made on a side branch and merged is named too
            "--format=%H%x1f%an <%ae>%x1f%aI",
            "--",
            keyring.RECIPIENTS,
        )
    except MemstoreError:
        return []
    out = []
    for line in log.splitlines():
        parts = line.split("\x1f")
        if len(parts) != 3:
            continue
        sha, who, when = parts
        now = keyring.recipients_in(git.blob(sha, keyring.RECIPIENTS))
        before = keyring.recipients_in(git.blob(f"{sha}^", keyring.RECIPIENTS))
        added = [r for r in now if r not in before]
        removed = [r for r in before if r not in now]
        what = "; ".join(
            x
            for x in (
                f"added {', '.join(added)}" if added else "",
                f"removed {', '.join(removed)}" if removed else "",
            )
            if x
        )
        out.append(
            f"{keyring.RECIPIENTS} changed in commit {sha[:10]} by {who} at {when}: "
            f"{what or 'same recipients, rewritten'} ({len(now)} recipient(s) after it)"
        )
    return out


def key_doubts(store) -> list[str]:
    """Key epochs that open but this clone does not trust, and a trusted newest epoch whose file is
    gone (memstore/keytrust.py): each stops writes until settled."""
    sealer = store.sealer
    out = [
        f"{keyring.epoch_name(e)}.age: opens with your identity but is not trusted here: {why} "
        f'(see "git log -- {keyring.epoch_name(e)}.age"; "ct keys trust {e}" if a reader made it, '
        "else revert that commit)"
        for e, why in sorted(sealer.doubtful.items())
    ]
    out += [
        f"{keyring.KEYS_DIR}/private-{kid}.age: opens with your identity but carries no auth line "
        "of yours, so its lines are not read as yours (someone who can push can wrap a key to your "
        f'public key; "ct keys trust {kid}" if you made it with a memstore from before auth lines)'
        for kid in sorted(sealer.doubtful_private)
    ]
    from .keys import listed_but_not_reader

    out += [
        f"{keyring.RECIPIENTS}: lists {r}, whom the newest key epoch's file does not name: no "
        "reader added it (anyone who can push can edit this plain list; new key epochs are "
        "wrapped to the readers the key file names, so it reads nothing new). Remove the line"
        for r in listed_but_not_reader(store)
    ]
    newest = max(keyring.epoch_files(store.root), default=None)
    if newest is not None and newest not in sealer.keys and newest not in sealer.doubtful:
        out.append(
            f"{keyring.epoch_name(newest)}.age: your identity does not open the newest key epoch, "
            "so nothing can be written here: you were removed as a recipient, or someone who can "
            f'push added it (see "git log -- {keyring.epoch_name(newest)}.age")'
        )
    if sealer.lost is not None and sealer.lost not in sealer.keys:
        out.append(
            f"{keyring.epoch_name(sealer.lost)}.age: gone, though this clone trusted it as the "
            'newest key epoch (find the commit: "git log --diff-filter=D -- keys", and revert it)'
        )
    return out


def fsck_without_key(store, why: str) -> Report:
    """The checks that need no key; `rep.unchecked` names the rest (`why`: why no key opened it)."""
    from .encrypt import line_files

    rep = Report()
    root = store.root
    epochs = keyring.epoch_files(root)
    if not epochs:
        rep.damage.append(f"{root / keyring.KEYS_DIR}: no epoch-NNNN.age key file")
    lists = [root / keyring.RECIPIENTS] + [p.with_suffix(".recipients") for p in epochs.values()]
    for path in lists:
        if not path.is_file():
            rep.damage.append(f"{path}: missing (the recipients its key file is wrapped to)")
            continue
        for n, line in enumerate(
            path.read_text(encoding="utf-8", errors="replace").splitlines(), 1
        ):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            try:
                keyring.parse_recipient(line)
            except MemstoreError:
                rep.damage.append(f"{path}:{n}: not a recipient (age1… or ssh-ed25519 AAAA…)")
    for e, path in epochs.items():
        if not path.read_bytes().startswith(AGE_HEADER):
            rep.damage.append(f"{path}: not an age file (epoch {e}'s key cannot be opened)")
    for rel in line_files(root):
        path = root / rel
        data = path.read_bytes()
        lines = data.split(b"\n")
        for n, raw in enumerate(lines, 1):
            if not raw:
                continue
            got = sealed_lines.parse(raw)
            if n == len(lines):
                rep.damage.append(f"{rel}:{n}: last line has no newline (an unfinished write)")
            elif got is None:
                rep.damage.append(
                    f"{rel}:{n}: not a sealed line, in an encrypted store (every committed line "
                    "must be sealed)"
                )
            elif got[0] not in epochs:
                rep.damage.append(
                    f"{rel}:{n}: sealed under key epoch {got[0]}, which {keyring.KEYS_DIR}/ does not have"
                )
            elif rel.startswith("log/"):
                rep.records += 1
    for day, folder in packfmt.all_pack_days(root).items():
        for p in packfmt.pack_files(folder):
            rep.packs += 1
            try:
                pk = packfmt.read(p, verify=True)
            except (OSError, packfmt.PackError) as exc:
                rep.damage.append(f"{p.relative_to(root)}: {exc}")
                continue
            if pk.manifest.get("day") != day:
                rep.damage.append(
                    f"{p.relative_to(root)}: its manifest says day {pk.manifest.get('day')}"
                )
    rep.notes += recipients_history(store)
    rep.unchecked = [
        f"no identity of yours opens this store ({why.rstrip('.')}); checked by form only"
    ]
    rep.unchecked += NOT_CHECKED
    return rep
