"""`memstore.toml`: format version, store id, timezone, embedder and settings.

The file is committed, so it arrives with every `git pull` and every copied folder: it is data
describing the store, never authority over the machine that reads it. Every value is checked
(FormatError, exit 4, naming the key). Anything that would send data somewhere, pick a credential
or load code (the `[llm]` section, an embedder's endpoint, key or model path) is the user's own
(memstore/userconfig.py); such a key found here is ignored with a one-line warning naming the
commit that set it.
"""

from __future__ import annotations

import re
import sys
import tomllib
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .. import FORMAT_VERSION, READABLE_FORMATS
from .. import storefile
from ..errors import FormatError, VersionError

FILENAME = "memstore.toml"

DEFAULT_SETTINGS = {
    "chunk_tokens": 200,
    "chunk_overlap": 32,
    "vector_dtype": "float32",
    # A write that finds this many packs in a day it touches consolidates the day into one pack.
    "consolidate_packs": 8,
}

# The widest vector a store may declare: the largest embedders make 4,096 or so. memstore.toml
# arrives with a `git pull`, and a reader sizes buffers by `dim` (2,000,000,000 would ask for GiBs).
MAX_DIM = 65536
# The only [embedder] keys a store may set: they say what made its vectors. Anything else there
# (base_url, api_key, api_key_env, model_path, ...) is ignored: see memstore/userconfig.py.
EMBEDDER_KEYS = ("name", "model", "dim", "dtype")
# Whole sections that are the user's own, never the store's.
USER_SECTIONS = ("llm",)
WHERE_INSTEAD = (
    "they are read only from the environment or ~/.config/memstore/config.toml (docs/format.md)"
)
_warned: set = set()


@dataclass
class Config:
    store_id: str
    timezone: str
    embedder: dict
    settings: dict = field(default_factory=lambda: dict(DEFAULT_SETTINGS))
    format_version: int = FORMAT_VERSION

    @classmethod
    def new(cls, timezone: str, embedder: dict, dtype: str = "float32") -> "Config":
        emb = {
            "name": embedder["name"],
            "model": embedder["model"],
            "dim": int(embedder["dim"]),
            "dtype": dtype,
        }
        for key, value in embedder.items():
            emb.setdefault(key, value)
        return cls(store_id=str(uuid.uuid4()), timezone=timezone, embedder=emb)

    def setting(self, key: str):
        return self.settings.get(key, DEFAULT_SETTINGS.get(key))

    def default_scope(self, imported: bool = False) -> str:
        """The scope of a new record that names none (docs/format.md, "Records"): `[settings]
        scope`, shared unless set; `import_scope` for conversation imports and `ct watch`."""
        scope = self.settings.get("scope", "shared")
        return self.settings.get("import_scope", scope) if imported else scope

    def dumps(self) -> str:
        lines = [
            "# memstore store configuration (docs/format.md)",
            f"format_version = {self.format_version}",
            f"store_id = {_q(self.store_id)}",
            f"timezone = {_q(self.timezone)}",
            "",
            "[embedder]",
        ]
        lines += [f"{k} = {_v(v)}" for k, v in self.embedder.items()]
        lines += ["", "[settings]"]
        lines += [f"{k} = {_v(v)}" for k, v in sorted(self.settings.items())]
        return "\n".join(lines) + "\n"

    def write(self, root: Path) -> None:
        (Path(root) / FILENAME).write_text(self.dumps(), encoding="utf-8")


def _q(s: str) -> str:
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _v(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return _q(v)


CONFIG_LIMIT = 1 << 20  # bytes: memstore writes a few hundred


def read(root: Path) -> Config:
    """Read and check memstore.toml; the version is checked before anything else is trusted."""
    path = Path(root) / FILENAME
    try:  # never through a link, nor a FIFO or device (memstore/storefile.py)
        text = storefile.read_text(path, root, limit=CONFIG_LIMIT)
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(path, f"not valid TOML ({exc})") from None
    except RecursionError:
        raise FormatError(path, "not valid TOML we can read (nested too deep)") from None
    except ValueError as exc:  # Python's int-string limit: an integer of over 4,300 digits
        raise FormatError(path, f"not valid TOML we can read ({exc})") from None
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise FormatError(
            path,
            "missing integer 'format_version'"
            if version is None
            else f"'format_version' must be a whole number, not {version!r}",
        )
    if version not in READABLE_FORMATS:
        raise VersionError(
            f"{path}: format_version {version} is not supported by this memstore "
            f"(it reads formats {', '.join(map(str, READABLE_FORMATS))}).",
            "Upgrade memstore to open this store." if version > FORMAT_VERSION else None,
        )
    emb = data.get("embedder")
    if not isinstance(emb, dict) or not {"name", "model", "dim"} <= set(emb):
        raise FormatError(path, "[embedder] must have name, model and dim")
    settings = dict(DEFAULT_SETTINGS)
    raw_settings = data.get("settings", {})
    if not isinstance(raw_settings, dict):
        raise _bad(path, "settings", "must be a table ([settings])")
    settings.update(raw_settings)
    cfg = Config(
        store_id=data.get("store_id", ""),
        timezone=data.get("timezone", "UTC"),
        embedder={k: v for k, v in emb.items() if k in EMBEDDER_KEYS},
        settings=settings,
        format_version=version,
    )
    check(path, cfg)
    ignored = [(sec, key) for sec in USER_SECTIONS for key in _keys(data.get(sec))]
    ignored += [("embedder", key) for key in emb if key not in EMBEDDER_KEYS]
    if ignored:
        _warn_ignored(path, text, ignored)
    return cfg


# ----- checks ----------------------------------------------------------------------------------


def _bad(path: Path, key: str, problem: str) -> FormatError:
    return FormatError(
        path,
        f"{key} {problem}",
        hint="Nothing was changed. Fix the value in memstore.toml (git log -p memstore.toml shows who set it).",
    )


def _shown(value) -> str:
    """A value for a message, a giant number cut short (its repr could be thousands of digits)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}… ({len(text)} characters)"


def _whole(value, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _choice(path: Path, key: str, value, choices: tuple) -> None:
    if value not in choices:
        raise _bad(path, key, f"must be one of {', '.join(choices)}, not {value!r}")


def check(path: Path, cfg: Config) -> None:
    """FormatError naming memstore.toml and the key for any value of the wrong type or range."""
    from ..adapters import EMBEDDERS
    from .timeutil import zone

    if not isinstance(cfg.store_id, str):
        raise _bad(path, "store_id", f"must be a string, not {cfg.store_id!r}")
    if not isinstance(cfg.timezone, str):
        raise _bad(path, "timezone", f"must be an IANA timezone name, not {cfg.timezone!r}")
    try:
        zone(cfg.timezone)
    except ValueError as exc:
        raise _bad(path, "timezone", f"is not usable: {exc}") from None
    emb = cfg.embedder
    _choice(path, "[embedder] name", emb["name"], tuple(sorted(EMBEDDERS)))
    if not isinstance(emb["model"], str) or not emb["model"]:
        raise _bad(path, "[embedder] model", f"must be a model name, not {emb['model']!r}")
    if not _whole(emb["dim"], 1) or emb["dim"] > MAX_DIM:
        raise _bad(
            path,
            "[embedder] dim",
            f"must be a whole number from 1 to {MAX_DIM}, not {_shown(emb['dim'])}",
        )
    if "dtype" in emb:
        _choice(path, "[embedder] dtype", emb["dtype"], ("float32", "int8"))
    _check_settings(path, cfg.settings)


def _check_settings(path: Path, s: dict) -> None:
    for key, low in (
        ("chunk_tokens", 1),
        ("chunk_overlap", 0),
        ("consolidate_packs", 0),
        ("max_children", 2),
    ):
        if key in s and not _whole(s[key], low):
            raise _bad(
                path,
                f"[settings] {key}",
                f"must be a whole number of {low} or more, not {s[key]!r}",
            )
    if s["chunk_overlap"] >= s["chunk_tokens"]:
        raise _bad(
            path,
            "[settings] chunk_overlap",
            f"must be smaller than chunk_tokens ({s['chunk_tokens']}), not {s['chunk_overlap']!r}",
        )
    _choice(path, "[settings] vector_dtype", s["vector_dtype"], ("float32", "int8"))
    for key in ("scope", "import_scope"):
        if key in s:
            _choice(path, f"[settings] {key}", s[key], ("shared", "private"))
    if "vector_index" in s:
        _choice(path, "[settings] vector_index", s["vector_index"], ("auto", "exact", "ivf"))
    if "ivf_nprobe" in s and not (_whole(s["ivf_nprobe"], 1) and s["ivf_nprobe"] <= 65536):
        raise _bad(
            path,
            "[settings] ivf_nprobe",
            f"must be a whole number from 1 to 65536, not {s['ivf_nprobe']!r}",
        )
    if "topics" in s and not isinstance(s["topics"], bool):
        raise _bad(path, "[settings] topics", f"must be true or false, not {s['topics']!r}")
    for key in (
        "topic_continue_threshold",
        "topic_recall_threshold",
        "topic_topic_threshold",
        "topic_join_threshold",
    ):
        value = s.get(key)
        if key in s and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= value <= 1
        ):
            raise _bad(path, f"[settings] {key}", f"must be a number from -1 to 1, not {value!r}")


# ----- keys that are the user's own ------------------------------------------------------------


def _keys(section) -> list[str]:
    if isinstance(section, dict):
        return list(section)
    return [] if section is None else ["(the whole value)"]


def _warn_ignored(path: Path, text: str, ignored: list[tuple[str, str]]) -> None:
    """One line per ignored key, once per process and version of the file, naming who set it."""
    token = (str(path), hash(text), tuple(ignored))
    if token in _warned:
        return
    _warned.add(token)
    for section, key in ignored:
        name = f"[{section}] {key}" if key != "(the whole value)" else section
        print(
            f"memstore: warning: {path}: ignoring {name} ({_who_set(path, text, section, key)}): "
            f"endpoints, API keys, model paths and LLM switches are never taken from a store; {WHERE_INSTEAD}",
            file=sys.stderr,
        )


def _line_of(text: str, section: str, key: str) -> int | None:
    """The 1-based line that sets `key` in `[section]` (or `section.key` / `section = {...}`)."""
    current = ""
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        head = re.match(r"\[\s*([^\]]+?)\s*\]", stripped)
        if head:
            current = head.group(1).strip().strip('"')
            continue
        m = re.match(r'([A-Za-z0-9_."\- ]+?)\s*=', stripped)
        if not m:
            continue
        name = m.group(1).replace('"', "").replace(" ", "")
        full = f"{current}.{name}" if current else name
        if full in (f"{section}.{key}", section):
            return n
    return None


def _who_set(path: Path, text: str, section: str, key: str) -> str:
    """`set by commit abc1234 (Name, 2026-05-01)`, from git blame of the line; cheap enough because
    it runs only when such a key is present."""
    line = _line_of(text, section, key)
    if line is None:
        return "line not found"
    from ..gitrepo import blame_line

    rows = blame_line(path, line)
    if rows is None:
        return f"line {line}"
    if not rows:
        return f"line {line}, not in git"
    sha = rows[0].split()[0]
    if set(sha) == {"0"}:
        return f"line {line}, not committed yet"
    author = next((r[7:] for r in rows if r.startswith("author ")), "?")
    return f"line {line}, set by commit {sha[:10]} by {author}"
