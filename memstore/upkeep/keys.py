"""Who can read an encrypted store: `ct keys add|remove|list` (docs/security.md).

Adding a recipient rewraps every key epoch to it (it reads the whole store, history included);
removing one starts a new epoch wrapped to the rest, so records written after the removal are
sealed under a key it never had. What it could read before it still can: it had those keys, and
git's history holds those lines. Every change is one commit of `keys/`.
"""

from __future__ import annotations

import re

from .. import keyring, keytrust
from ..errors import UsageError


def readers(store) -> list[str]:
    """Who reads the store now, as the newest epoch this clone trusts says inside its key file
    (only a holder of its key can write that); a key file from before says nothing, and then
    `keys/recipients` is taken. Never `keys/recipients` over the key file: anyone who can push
    can add a name to it, and the next new epoch would be wrapped to that name too."""
    sealer = store.sealer
    said = sealer.readers.get(sealer.newest) if sealer.newest in sealer.keys else None
    return list(said) if said else keyring.read_recipients(store.root / keyring.RECIPIENTS)


def listed_but_not_reader(store) -> list[str]:
    """Recipients `keys/recipients` lists that the newest trusted key file does not name."""
    sealer = store.sealer
    said = sealer.readers.get(sealer.newest) if sealer.newest in sealer.keys else None
    if not said:
        return []
    return [r for r in keyring.read_recipients(store.root / keyring.RECIPIENTS) if r not in said]


def _need_encrypted(store) -> None:
    if store.sealer is None:
        raise UsageError(
            f"{store.root} is not an encrypted store (no {keyring.RECIPIENTS}).",
            'Only a store made with "ct init --encrypt" has recipients. Nothing was changed.',
        )


def listing(store) -> dict:
    _need_encrypted(store)
    epochs = keyring.epoch_files(store.root)
    sealer = store.sealer
    return {
        "recipients": readers(store),
        "listed_not_readers": listed_but_not_reader(store),
        "epoch": max(epochs),
        "epochs_opened": sorted(sealer.keys),
        "epochs": {
            e: keyring.read_recipients(p.with_suffix(".recipients")) for e, p in epochs.items()
        },
        "untrusted": {e: why for e, why in sorted(sealer.doubtful.items())},
        "untrusted_private": sorted(sealer.doubtful_private),
        "gone": sealer.lost if sealer.lost is not None and sealer.lost not in sealer.keys else None,
    }


def trust(store, which: list) -> dict:
    """Trust key epochs (numbers) or private keys (16-hex ids) that open with the user's identity
    but carry no vouch or `auth` this clone can check (memstore/keytrust.py), after the user has
    looked at who committed them: recorded in this clone's git folder, no commit.
    → {trusted: [...], commits: {what: 'sha author date'}}."""
    from ..gitrepo import git_dir

    _need_encrypted(store)
    sealer = store.sealer
    doubts = [str(e) for e in sorted(sealer.doubtful)] + sorted(sealer.doubtful_private)
    if not which:
        raise UsageError(
            "keys trust: name the key epoch(s) or private key id(s) to trust ("
            + (", ".join(doubts) or "none is in doubt now")
            + ")."
        )
    epochs, kids = [], []
    for w in map(str, which):
        if w.isdigit() and int(w) in sealer.doubtful:
            epochs.append(int(w))
        elif w in sealer.doubtful_private:
            kids.append(w)
        else:
            if w.isdigit():
                known = (
                    "is trusted already"
                    if int(w) in sealer.keys
                    else "does not open with your identity"
                )
            else:
                known = (
                    "is yours or trusted already"
                    if w in sealer.private
                    else "does not open with your identity"
                )
            raise UsageError(
                f"{w}: that key {known}; nothing was changed (in doubt: {', '.join(doubts) or 'none'})."
            )
    record = sealer.trust.copy()
    commits = {}
    for e in epochs:
        record.epochs[e] = keytrust.epoch_secret(sealer.doubtful_keys[e])
        record.newest = max(record.newest, e)
        commits[str(e)] = _last_commit(store, f"{keyring.epoch_name(e)}.age")
    for kid in kids:
        record.private.add(kid)
        commits[kid] = _last_commit(store, f"{keyring.KEYS_DIR}/private-{kid}.age")
    record.save(git_dir(store.root))
    for e in epochs:
        sealer.keys[e] = sealer.doubtful_keys.pop(e)
        sealer.doubtful.pop(e)
    for kid in kids:
        sealer.private[kid] = sealer.doubtful_private.pop(kid)
    sealer.trust = record
    _reread(store, [f"ms1.{e}.".encode() for e in epochs] + [f"ms1p.{k}.".encode() for k in kids])
    return {"trusted": [str(e) for e in epochs] + kids, "commits": commits}


def _reread(store, prefixes: list[bytes]) -> None:
    """The day logs holding lines under keys just trusted are read again by the next index update
    (their time touched: the index left those lines out, and the files did not change)."""
    import os

    from .. import storefile
    from ..format import log as logfmt

    for path in logfmt.list_days(store.root).values():
        try:
            data = storefile.read_bytes(path)
        except (OSError, storefile.StoreLink):
            continue
        if any(data.startswith(x) or b"\n" + x in data for x in prefixes):
            os.utime(path)


def _last_commit(store, rel: str) -> str:
    return store.git.run("log", "-1", "--format=%h %an <%ae> %aI", "--", rel).strip()


def add(store, recipient: str) -> dict:
    """Wrap every epoch (the newest too) to `recipient` as well; list it."""
    _need_encrypted(store)
    rcpt = keyring.normal_recipient(recipient)
    store.sealer.refuse_doubt()  # never hand a key someone who can push made to a newcomer
    current = readers(store)
    if rcpt in current:
        raise UsageError(f"{rcpt} is already a recipient of {store.root}; nothing was changed.")
    epochs = keyring.epoch_files(store.root)
    missing = [e for e in epochs if e not in store.sealer.keys]
    if missing:
        raise UsageError(
            f"your identity does not open key epoch(s) {', '.join(map(str, missing))}, so it cannot "
            f"give them to {rcpt}; nothing was changed."
        )
    vouches = store.sealer.vouches
    said = {r for got in store.sealer.readers.values() for r in got or []}
    with store.transaction(f"Keys: add a recipient ({len(current) + 1} in all)") as tx:
        for e, p in epochs.items():
            had = store.sealer.readers.get(e)
            if not had:  # a key file from before `reader:` lines: its plain list, less any name
                had = keyring.read_recipients(p.with_suffix(".recipients"))  # no key file says
                had = [r for r in had if r in said or r in current] if said else had
            had = [r for r in had if r != rcpt]
            key = store.sealer.keys[e]
            tx.stage(keyring.wrap_epoch(store.root, e, key, had + [rcpt], vouches.get(e, [])))
        keyring.write_recipients(store.root / keyring.RECIPIENTS, current + [rcpt])
        tx.stage([keyring.RECIPIENTS])
    return {"recipient": rcpt, "epochs": sorted(epochs), "commit": tx.commit}


def remove(store, recipient: str) -> dict:
    """A new epoch wrapped to every recipient but `recipient`; writes from now on use it."""
    _need_encrypted(store)
    rcpt = keyring.normal_recipient(recipient)
    store.sealer.refuse_doubt()
    current = readers(store)
    if rcpt not in current:
        raise UsageError(f"{rcpt} is not a recipient of {store.root}; nothing was changed.")
    rest = [r for r in current if r != rcpt]
    if not rest:
        raise UsageError(
            "that is the store's last recipient: no one could read it; nothing was changed."
        )
    return {"recipient": rcpt, **_new_epoch(store, rest, "remove a recipient")}


def rotate(store, rewrite: bool = False) -> dict:
    """A new epoch wrapped to the same recipients (a key that may have leaked stops sealing).

    `rewrite`: every line of the current files is sealed again under the new epoch in the same
    commit, the older epochs' key files are deleted, and every earlier commit is rewritten the same
    way (forget/purge.py's machinery), so no line reachable from a branch opens with an old key."""
    _need_encrypted(store)
    store.sealer.refuse_doubt()
    now = readers(store)
    if not rewrite:
        return _new_epoch(store, now, "rotate")
    from ..forget.purge import refuse_shallow_purge, rewrite_sealed
    from ..gitrepo import refuse_if_unfinished
    from .encrypt import line_files

    epochs = keyring.epoch_files(store.root)
    missing = [e for e in epochs if e not in store.sealer.keys]
    if missing:
        raise UsageError(
            f"your identity does not open key epoch(s) {', '.join(map(str, missing))}: their lines "
            "cannot be sealed again, and rewriting would lose them. Nothing was changed."
        )
    refuse_if_unfinished(store.root, "rotate the key")
    refuse_shallow_purge(store)
    dirty = store.git.run("status", "--porcelain", "--untracked-files=all").splitlines()
    if dirty:
        raise UsageError(
            f"{store.root / dirty[0][3:]} has uncommitted changes: commit or roll them back first "
            '("ct fsck --repair"). Nothing was changed.'
        )
    old_keys = dict(store.sealer.keys)
    res = _new_epoch(store, now, "rotate and reseal", reseal=line_files(store.root))
    epoch = res["epoch"]
    keep = {f"{keyring.epoch_name(epoch)}.age", f"{keyring.epoch_name(epoch)}.recipients"}
    drop = r"^keys/epoch-\d+\.(age|recipients)$"
    files = {p: (store.root / p).read_bytes() for p in keep}
    notice = rewrite_sealed(
        store,
        {**old_keys, epoch: store.sealer.keys[epoch]},
        epoch,
        (),
        f"The current files are sealed under key epoch {epoch}",
        keys_files=files,
        drop=f"(?!{'|'.join(re.escape(k) + '$' for k in sorted(keep))}){drop}",
    )
    store.sealer.keys = {epoch: store.sealer.keys[epoch]}
    first = f"History rewritten: every line of every commit is sealed under key epoch {epoch} only."
    return {
        **res,
        "commit": store.git.run("rev-parse", "HEAD"),
        "notice": first + notice[notice.index("\n") :],
    }


def _new_epoch(store, who: list[str], why: str, reseal: list[str] | None = None) -> dict:
    """Write epoch N+1 (one commit). `reseal`: these line files are sealed again under it whole,
    and the older epochs' key files are deleted in the same commit."""
    from ..format import log as logfmt

    prev_key = store.sealer.write_key()  # a removed recipient cannot start epochs either
    old = keyring.epoch_files(store.root)
    epoch = max(old) + 1
    key = keyring.new_key()
    # vouched for by the newest epoch; a rewrite that deletes the older epochs' files also by
    # every epoch this clone ever trusted (its record keeps their secrets), so a clone that never
    # saw the newest, or the ones an earlier rewrite deleted, can still check the chain
    secrets = {}
    if reseal is not None:
        record = store.sealer.trust
        secrets = dict(record.epochs) if record is not None else {}
        secrets.update({e: keytrust.epoch_secret(k) for e, k in store.sealer.keys.items()})
    secrets[store.sealer.newest] = keytrust.epoch_secret(prev_key)
    vouches = [
        keytrust.vouch_by_secret(p, sec, epoch, key)
        for p, sec in sorted(secrets.items())
        if p < epoch
    ]
    before = (dict(store.sealer.keys), store.sealer.newest)
    try:
        with store.transaction(f"Keys: {why}, new key epoch {epoch}") as tx:
            plain = {rel: logfmt.read_plain(store.root / rel) for rel in reseal or []}
            tx.stage(keyring.wrap_epoch(store.root, epoch, key, who, vouches))
            keyring.write_recipients(store.root / keyring.RECIPIENTS, who)
            tx.stage([keyring.RECIPIENTS])
            store.sealer.keys[epoch] = key
            store.sealer.newest = epoch
            store.sealer.vouches[epoch] = vouches
            store.sealer.readers[epoch] = [keyring.normal_recipient(r) for r in who]
            for rel, data in plain.items():
                logfmt.rewrite(store.root / rel, data)
            tx.stage(list(plain))
            if reseal is not None:
                for e, p in old.items():
                    for f in (p, p.with_suffix(".recipients")):
                        f.unlink(missing_ok=True)
                        tx.stage(f.relative_to(store.root).as_posix())
    except BaseException:
        store.sealer.keys, store.sealer.newest = before
        raise
    if reseal is not None:
        store.sealer.keys = {epoch: key}
    return {"epoch": epoch, "commit": tx.commit}
