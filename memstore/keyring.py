"""Keys of encrypted stores: the user's age identity, the store's recipients and its epoch keys
(docs/format.md "Encrypted stores", docs/security.md).

- An identity is an age X25519 secret key file (`ct keys new`, mode 0600) or an SSH ed25519
  private key; it is found through `--identity FILE`, then $MEMSTORE_IDENTITY, then
  `age-identity.txt` beside the user's config file (memstore/userconfig.py).
- A store's `keys/recipients` lists who can read it now; `keys/epoch-NNNN.age` is an age file
  (openable with plain `age -d -i IDENTITY`) holding that epoch's random 64-byte line key, wrapped
  to `keys/epoch-NNNN.recipients`. Removing a recipient starts a new epoch; adding one rewraps every
  epoch to it.
- A writer's private key, `keys/private-<id>.age` (id: 16 random hex digits), holds the 64-byte
  key of that writer's private lines, wrapped to the writer's recipient alone (listed beside it in
  `keys/private-<id>.recipient`); made by the writer's first private record.

age is pyrage (the Rust `age` crate); the line AEAD is format/sealed_lines.py. Nothing hand-made.
"""

from __future__ import annotations

import base64
import os
import re
import stat
from pathlib import Path

from . import storefile
from .errors import MemstoreError, UsageError
from .format.sealed_lines import KEY_BYTES, NoKeyError, Sealer

KEYS_DIR = "keys"
RECIPIENTS = f"{KEYS_DIR}/recipients"
_EPOCH = re.compile(r"^epoch-(\d{4,6})\.age$")
_HEADER = "memstore epoch key 1"
_PRIVATE = re.compile(r"^private-([0-9a-f]{16})\.age$")
_PRIVATE_HEADER = "memstore private key 1"
_KEY_FILE_LIMIT = 1 << 20  # a key file or recipients list memstore writes is a few hundred bytes


# ----- the user's identity ------------------------------------------------------------------------


def default_identity_path() -> Path:
    from .userconfig import config_path

    return config_path().parent / "age-identity.txt"


def identity_path(explicit: str | os.PathLike | None = None) -> Path | None:
    """--identity FILE, else $MEMSTORE_IDENTITY, else the default path when it exists."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("MEMSTORE_IDENTITY")
    if env:
        return Path(env).expanduser()
    p = default_identity_path()
    return p if p.exists() else None


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise NoKeyError(f"{path}: cannot read the identity file ({exc.strerror}).") from None


def load_identities(path: Path) -> list:
    """The age identities in `path`: X25519 secret keys (one a line) or one SSH ed25519 key."""
    from pyrage import ssh, x25519

    data = _read(path)
    text = data.decode("utf-8", "replace")
    if "-----BEGIN OPENSSH PRIVATE KEY-----" in text:
        try:
            return [ssh.Identity.from_buffer(data)]
        except Exception as exc:  # pyrage raises its own error types
            raise NoKeyError(
                f"{path}: not a usable SSH key ({exc}); only unencrypted ed25519 keys work."
            ) from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            out.append(x25519.Identity.from_str(line))
        except Exception:
            raise NoKeyError(
                f"{path}:{n}: not an age identity (AGE-SECRET-KEY-1…) or SSH ed25519 key."
            ) from None
    if not out:
        raise NoKeyError(f"{path}: holds no age identity.")
    return out


def recipient_of(path: Path) -> str:
    """The recipient that `path`'s identity opens: `age1…`, or the SSH key's `.pub` line."""
    ids = load_identities(path)
    if hasattr(ids[0], "to_public"):
        return str(ids[0].to_public())
    pub = Path(str(path) + ".pub")
    try:
        return pub.read_text(encoding="utf-8").strip()
    except OSError:
        raise UsageError(
            f"{path}: an SSH identity's recipient is its public key, and {pub} is not there.",
            "Give the recipient with --recipient 'ssh-ed25519 AAAA…'.",
        ) from None


def new_identity(path: Path) -> str:
    """Write a new X25519 identity to `path` (mode 0600, never over a file); its recipient."""
    from datetime import datetime, timezone

    from pyrage import x25519

    ident = x25519.Identity.generate()
    rcpt = str(ident.to_public())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise UsageError(f"{path} already exists; nothing was changed.") from None
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"# created: {stamp}\n# public key: {rcpt}\n{ident}\n")
    os.chmod(path, 0o600)
    return rcpt


def parse_recipient(text: str):
    """A pyrage recipient from `age1…` or `ssh-ed25519 AAAA… [comment]`; UsageError otherwise."""
    from pyrage import ssh, x25519

    text = text.strip()
    try:
        if text.startswith("age1"):
            return x25519.Recipient.from_str(text)
        if text.startswith("ssh-ed25519 "):
            return ssh.Recipient.from_str(text)
    except Exception:
        pass
    raise UsageError(
        f"not a recipient: {text[:80]!r}",
        "Give an age recipient (age1…) or an SSH ed25519 public key line (ssh-ed25519 AAAA…).",
    )


def normal_recipient(text: str) -> str:
    """A recipient as the store lists it: `age1…`, or `ssh-ed25519 KEY` without the comment."""
    parse_recipient(text)
    parts = text.split()
    return " ".join(parts[:2])


# ----- a store's recipients and epochs --------------------------------------------------------------


def is_encrypted(root: Path) -> bool:
    return (Path(root) / RECIPIENTS).is_file()


def read_recipients(path: Path) -> list[str]:
    if not path.is_file():
        return []
    return recipients_in(storefile.read_bytes(path, limit=_KEY_FILE_LIMIT))


def recipients_in(data: bytes | None) -> list[str]:
    """The recipients a recipients list holds, one a line (`#` starts a comment)."""
    out = []
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def write_recipients(path: Path, recipients: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r + "\n" for r in recipients), encoding="utf-8")


def _regular(path: Path) -> bool:
    """A key file is used only as a regular file: a link (to another key file, /dev/zero, a file
    outside the store) or a FIFO under keys/ is left out here, and `ct fsck` names it."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def epoch_files(root: Path) -> dict[int, Path]:
    d = Path(root) / KEYS_DIR
    out = {}
    if d.is_dir() and not d.is_symlink():
        for name in os.listdir(d):
            m = _EPOCH.match(name)
            if m and _regular(d / name):
                out[int(m.group(1))] = d / name
    return dict(sorted(out.items()))


def epoch_name(epoch: int) -> str:
    return f"{KEYS_DIR}/epoch-{epoch:04d}"


def wrap_epoch(
    root: Path, epoch: int, key: bytes, recipients: list[str], vouches: list[str] = ()
) -> list[str]:
    """Write `keys/epoch-NNNN.age` (the key wrapped to `recipients`, with the `after:` lines that
    vouch for it, memstore/keytrust.py) and its `.recipients` list; the store-relative paths."""
    import pyrage

    body = f"{_HEADER}\nepoch: {epoch}\nkey: {base64.b64encode(key).decode('ascii')}\n"
    body += "".join(f"{v}\n" for v in vouches)
    # who it is wrapped to, where only a holder of the key can write it (the .recipients file
    # beside it is plain text anyone who can push can change)
    body += "".join(f"reader: {normal_recipient(r)}\n" for r in recipients)
    sealed = pyrage.encrypt(body.encode("ascii"), [parse_recipient(r) for r in recipients])
    base = Path(root) / epoch_name(epoch)
    base.parent.mkdir(parents=True, exist_ok=True)
    base.with_suffix(".age").write_bytes(sealed)
    write_recipients(base.with_suffix(".recipients"), recipients)
    return [epoch_name(epoch) + ".age", epoch_name(epoch) + ".recipients"]


def _unwrap(
    path: Path, identities: list, header: str, second: str, what: str
) -> tuple[bytes, list[str]] | None:
    """The key of an age-wrapped key file (`header`, `second`, `key: <base64>`) and the lines after
    it, or None when no identity opens it; NoKeyError when it opens but is not that file."""
    import pyrage

    try:
        data = storefile.read_bytes(path, limit=_KEY_FILE_LIMIT)
    except (OSError, storefile.StoreLink, MemstoreError) as exc:
        raise NoKeyError(f"{path}: cannot be read as a key file ({exc}).") from None
    try:
        body = pyrage.decrypt(data, identities)
    except Exception:
        return None
    lines = body.decode("ascii", "replace").splitlines()
    try:
        assert lines[0] == header and lines[1] == second and lines[2].startswith("key: ")
        key = base64.b64decode(lines[2][5:], validate=True)
        assert len(key) == KEY_BYTES and len(lines) <= 1000
    except (AssertionError, IndexError, ValueError):
        raise NoKeyError(f"{path}: opens, but is not memstore's {what}.") from None
    return key, lines[3:]


def unwrap_epoch(path: Path, epoch: int, identities: list) -> tuple[bytes, list[str]] | None:
    """The epoch's key and the lines after it (`after:` vouches, `reader:` recipients), or None
    when no identity opens it; NoKeyError when it is malformed."""
    got = _unwrap(
        path,
        identities,
        _HEADER,
        f"epoch: {epoch}",
        f"epoch {epoch} key file (header, epoch or key wrong)",
    )
    if got is None:
        return None
    return got


def vouches_in(extra: list[str]) -> list[str]:
    return [x for x in extra if x.startswith("after:")]


def readers_in(extra: list[str]) -> list[str] | None:
    """The recipients an epoch file says it is wrapped to, inside the file (None: it does not
    say, a memstore from before wrote it)."""
    got = [x[len("reader: ") :].strip() for x in extra if x.startswith("reader: ")]
    return got or None


def private_files(root: Path) -> dict[str, Path]:
    """{key id: keys/private-<id>.age} of every writer's private key in the store."""
    d = Path(root) / KEYS_DIR
    out = {}
    if d.is_dir() and not d.is_symlink():
        for name in sorted(os.listdir(d)):
            m = _PRIVATE.match(name)
            if m and _regular(d / name):
                out[m.group(1)] = d / name
    return out


def wrap_private(root: Path, recipient: str, owner: bytes) -> tuple[str, bytes, list[str]]:
    """A new private key for the writer `recipient`: (key id, key, store-relative paths written).
    `owner`: the writer's owner secret (keytrust.owner_secrets), which authenticates the file. The
    id is random, so two clones of one writer never write the same path."""
    import pyrage

    from .keytrust import private_auth

    kid, key = os.urandom(8).hex(), new_key()
    body = f"{_PRIVATE_HEADER}\nid: {kid}\nkey: {base64.b64encode(key).decode('ascii')}\n"
    body += private_auth(owner, kid, key) + "\n"
    sealed = pyrage.encrypt(body.encode("ascii"), [parse_recipient(recipient)])
    base = Path(root) / KEYS_DIR / f"private-{kid}"
    base.parent.mkdir(parents=True, exist_ok=True)
    base.with_suffix(".age").write_bytes(sealed)
    base.with_suffix(".recipient").write_text(normal_recipient(recipient) + "\n", encoding="utf-8")
    rel = f"{KEYS_DIR}/private-{kid}"
    return kid, key, [rel + ".age", rel + ".recipient"]


def owner_secret(path: Path) -> bytes:
    """The owner secret of the identity file's first identity (the one `recipient_of` names)."""
    from .keytrust import owner_secrets

    return owner_secrets(path, load_identities(path)[:1])[0]


def unwrap_private(path: Path, kid: str, identities: list) -> tuple[bytes, list[str]] | None:
    """A private key file's key and its lines after the key, or None when it is not this
    identity's (another writer's)."""
    return _unwrap(
        path,
        identities,
        _PRIVATE_HEADER,
        f"id: {kid}",
        f"private key {kid} (header, id or key wrong)",
    )


def new_key() -> bytes:
    return os.urandom(KEY_BYTES)


def open_store(root: Path, explicit_identity=None, record=None, migrating: bool = False) -> Sealer:
    """The Sealer for an encrypted store: every epoch key the user's identity opens that this
    clone trusts (memstore/keytrust.py: `record` is the clone's record, None when it has none;
    `migrating`: it opened the store before vouches, so what opens now is trusted once). The
    Sealer's `trust` is the record to keep."""
    from .keytrust import decide, owner_secrets, private_is_owned

    path = identity_path(explicit_identity)
    if path is None:
        raise NoKeyError(
            f"{root} is an encrypted store, and no identity was given.",
            "Give one with --identity FILE or MEMSTORE_IDENTITY, or create "
            f'{default_identity_path()} with "ct keys new" and ask a recipient to run '
            '"ct keys add RECIPIENT". Nothing was read.',
        )
    identities = load_identities(path)
    files = epoch_files(root)
    if not files:
        raise NoKeyError(f"{root / KEYS_DIR}: an encrypted store without any epoch key file.")
    opened = {}
    for epoch, f in files.items():
        got = unwrap_epoch(f, epoch, identities)
        if got is not None:
            opened[epoch] = got
    if not opened:
        raise NoKeyError(
            f"{root}: your identity {path} opens none of the store's key epochs "
            f"({', '.join(str(e) for e in files)}): it is not a recipient of this store.",
            f'Ask a recipient to run "ct keys add {_safe_recipient(path)}". Nothing was read.',
        )
    verdict = decide(
        {e: (k, vouches_in(extra)) for e, (k, extra) in opened.items()},
        list(files),
        record,
        migrating,
    )
    secrets = owner_secrets(path, identities)
    private, own, doubtful_private = {}, set(), {}
    for kid, f in private_files(root).items():
        got = unwrap_private(f, kid, identities)
        if got is None:
            continue
        if private_is_owned(secrets, kid, *got):
            private[kid] = got[0]
            own.add(kid)
        elif migrating or kid in verdict.record.private:
            private[kid] = got[0]  # made before `auth` lines: read, never sealed to
            verdict.record.private.add(kid)
        else:  # planted (or old, in a fresh clone): its lines are not read as yours
            doubtful_private[kid] = got[0]
    sealer = Sealer(
        root,
        verdict.trusted,
        max(files),
        identity_note=f" ({path})",
        private=private,
        identity=path,
    )
    sealer.own, sealer.doubtful_private = own, doubtful_private
    sealer.vouches = {e: vouches_in(opened[e][1]) for e in verdict.trusted}
    sealer.readers = {e: readers_in(opened[e][1]) for e in verdict.trusted}
    sealer.doubtful, sealer.doubtful_keys = verdict.doubtful, verdict.doubtful_keys
    sealer.lost, sealer.trust = verdict.lost, verdict.record
    return sealer


def _safe_recipient(path: Path) -> str:
    try:
        return recipient_of(path)
    except Exception:
        return "YOUR_RECIPIENT"
