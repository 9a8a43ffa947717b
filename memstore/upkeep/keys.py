"""Who can read an encrypted store: `ct keys add|remove|list` (docs/security.md).

Adding a recipient rewraps every key epoch to it (it reads the whole store, history included);
removing one starts a new epoch wrapped to the rest, so records written after the removal are
sealed under a key it never had. What it could read before it still can: it had those keys, and
git's history holds those lines. Every change is one commit of `keys/`.
"""

from __future__ import annotations

from ..errors import UsageError
from .. import keyring


def _need_encrypted(store) -> None:
    if store.sealer is None:
        raise UsageError(
            f"{store.root} is not an encrypted store (no {keyring.RECIPIENTS}).",
            'Only a store made with "ct init --encrypt" has recipients. Nothing was changed.',
        )


def listing(store) -> dict:
    _need_encrypted(store)
    epochs = keyring.epoch_files(store.root)
    return {
        "recipients": keyring.read_recipients(store.root / keyring.RECIPIENTS),
        "epoch": max(epochs),
        "epochs_opened": sorted(store.sealer.keys),
        "epochs": {
            e: keyring.read_recipients(p.with_suffix(".recipients")) for e, p in epochs.items()
        },
    }


def add(store, recipient: str) -> dict:
    """Wrap every epoch (the newest too) to `recipient` as well; list it."""
    _need_encrypted(store)
    rcpt = keyring.normal_recipient(recipient)
    current = keyring.read_recipients(store.root / keyring.RECIPIENTS)
    if rcpt in current:
        raise UsageError(f"{rcpt} is already a recipient of {store.root}; nothing was changed.")
    epochs = keyring.epoch_files(store.root)
    missing = [e for e in epochs if e not in store.sealer.keys]
    if missing:
        raise UsageError(
            f"your identity does not open key epoch(s) {', '.join(map(str, missing))}, so it cannot "
            f"give them to {rcpt}; nothing was changed."
        )
    with store.transaction(f"Keys: add a recipient ({len(current) + 1} in all)") as tx:
        for e, p in epochs.items():
            had = keyring.read_recipients(p.with_suffix(".recipients"))
            tx.stage(keyring.wrap_epoch(store.root, e, store.sealer.keys[e], had + [rcpt]))
        keyring.write_recipients(store.root / keyring.RECIPIENTS, current + [rcpt])
        tx.stage([keyring.RECIPIENTS])
    return {"recipient": rcpt, "epochs": sorted(epochs), "commit": tx.commit}


def remove(store, recipient: str) -> dict:
    """A new epoch wrapped to every recipient but `recipient`; writes from now on use it."""
    _need_encrypted(store)
    rcpt = keyring.normal_recipient(recipient)
    current = keyring.read_recipients(store.root / keyring.RECIPIENTS)
    if rcpt not in current:
        raise UsageError(f"{rcpt} is not a recipient of {store.root}; nothing was changed.")
    rest = [r for r in current if r != rcpt]
    if not rest:
        raise UsageError(
            "that is the store's last recipient: no one could read it; nothing was changed."
        )
    return {"recipient": rcpt, **_new_epoch(store, rest, "remove a recipient")}


def rotate(store) -> dict:
    """A new epoch wrapped to the same recipients (a key that may have leaked stops sealing)."""
    _need_encrypted(store)
    return _new_epoch(store, keyring.read_recipients(store.root / keyring.RECIPIENTS), "rotate")


def _new_epoch(store, readers: list[str], why: str) -> dict:
    store.sealer.write_key()  # a removed recipient cannot start epochs either
    epoch = max(keyring.epoch_files(store.root)) + 1
    key = keyring.new_key()
    with store.transaction(f"Keys: {why}, new key epoch {epoch}") as tx:
        tx.stage(keyring.wrap_epoch(store.root, epoch, key, readers))
        keyring.write_recipients(store.root / keyring.RECIPIENTS, readers)
        tx.stage([keyring.RECIPIENTS])
        store.sealer.keys[epoch] = key
        store.sealer.newest = epoch
    return {"epoch": epoch, "commit": tx.commit}
