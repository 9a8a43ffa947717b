"""Settings that send data, pick a credential or load code: the user's own, never the store's.

A store's files arrive with `git pull` and with every copied folder, so a value read from them
would let anyone who can push to the store (or hand over a copy) choose where memory is sent and
which secret travels with it. These settings are read only from, first to last:

1. the environment: OPENAI_BASE_URL, OPENAI_API_KEY, MEMSTORE_LLM_MODEL, MEMSTORE_LLM_TIMEOUT,
   MEMSTORE_LLM_TOPICS;
2. a `.env` file in the current folder, unless that folder is inside a store (a `.env` there came
   with the store's files: it is skipped with a warning);
3. the user's config file, $MEMSTORE_CONFIG or ${XDG_CONFIG_HOME:-~/.config}/memstore/config.toml:

       [llm]
       base_url = "http://localhost:11434/v1"   # an OpenAI-compatible endpoint
       api_key_env = "OPENAI_API_KEY"           # the variable that holds its key
       model = "gpt-4o-mini"
       timeout = 30
       topics = false                           # name/summarise topics on the write path

       [embedder]                               # the openai embedder's endpoint and key
       base_url = "https://api.openai.com/v1"
       api_key_env = "OPENAI_API_KEY"
       model_path = "/models/all-MiniLM-L6-v2"  # the minilm embedder's weights folder

   and, at its top, `author = "Ana Lopez <ana@example.com>"`: the name every record you write
   carries (docs/format.md, "Records"; a store's `git config memstore.author` comes first).

A bad value in that file is the user's own mistake and stops the command (exit 4, naming the file
and the key); memstore.toml's checks are in memstore/format/config.py.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from .errors import FormatError

STORE_FILE = "memstore.toml"  # what marks a folder as a store (memstore.format.config.FILENAME)
_LLM_KEYS = {
    "base_url": str,
    "api_key_env": str,
    "model": str,
    "timeout": (int, float),
    "topics": bool,
}
_EMBEDDER_KEYS = {"base_url": str, "api_key_env": str, "model_path": str}
_warned: set[str] = set()


def config_path() -> Path:
    """$MEMSTORE_CONFIG, else ${XDG_CONFIG_HOME:-~/.config}/memstore/config.toml."""
    if os.environ.get("MEMSTORE_CONFIG"):
        return Path(os.environ["MEMSTORE_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "memstore" / "config.toml"


def user_file() -> dict:
    """The user's config file as {"llm": {...}, "embedder": {...}, "author": str}; {} when there is
    none."""
    path = config_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(path, f"cannot be read as TOML ({exc})") from None
    out = {}
    if "author" in data:  # its form is checked where it is used (Core.author)
        if not isinstance(data["author"], str):
            raise FormatError(path, f"author must be a string, not {type(data['author']).__name__}")
        out["author"] = data["author"]
    for section, keys in (("llm", _LLM_KEYS), ("embedder", _EMBEDDER_KEYS)):
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise FormatError(path, f"{section} must be a table ([{section}])")
        for key, value in table.items():
            kind = keys.get(key)
            if kind is None:
                raise FormatError(
                    path, f"[{section}] {key} is not a setting (known: {', '.join(keys)})"
                )
            if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                raise FormatError(path, f"[{section}] {key} has the wrong type ({value!r})")
        out[section] = dict(table)
    return out


def inside_store(folder: Path) -> Path | None:
    """The store root at or above `folder`, if any."""
    here = Path(folder).resolve()
    for p in [here, *here.parents]:
        if (p / STORE_FILE).is_file():
            return p
    return None


def read_dotenv(path: str | Path) -> dict[str, str]:
    """KEY=VALUE pairs from a .env file (comments, `export` and quotes allowed); {} if absent."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    values = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[key.strip()] = value
    return values


def dotenv() -> dict[str, str]:
    """The current folder's `.env`, unless the folder is inside a store (then {} and a warning)."""
    path = Path.cwd() / ".env"
    if not path.is_file():
        return {}
    store = inside_store(path.parent)
    if store is not None:
        if str(path) not in _warned:
            _warned.add(str(path))
            print(
                f"memstore: warning: not reading {path}: it lies inside the store {store}, whose files "
                f"never choose endpoints or keys; set them in the environment or {config_path()}",
                file=sys.stderr,
            )
        return {}
    return read_dotenv(path)


def environment() -> dict[str, str]:
    """The `.env` values (where one may be read) overlaid by the real environment."""
    return {**dotenv(), **os.environ}


def llm_settings() -> dict:
    """base_url, api_key, model, timeout, topics for the chat LLM (None where unset)."""
    env, own = environment(), user_file().get("llm", {})
    key_var = own.get("api_key_env", "OPENAI_API_KEY")
    topics = env.get("MEMSTORE_LLM_TOPICS")
    return {
        "base_url": env.get("OPENAI_BASE_URL") or own.get("base_url") or None,
        "api_key": env.get(key_var) or None,
        "model": env.get("MEMSTORE_LLM_MODEL") or own.get("model") or None,
        "timeout": env.get("MEMSTORE_LLM_TIMEOUT") or own.get("timeout") or None,
        "topics": _truthy(topics) if topics is not None else bool(own.get("topics", False)),
    }


def openai_endpoint() -> tuple[str | None, str | None]:
    """(base_url, api_key) for the openai embedder: the environment (and .env), then [embedder]."""
    env, own = environment(), user_file().get("embedder", {})
    key_var = own.get("api_key_env", "OPENAI_API_KEY")
    return env.get("OPENAI_BASE_URL") or own.get("base_url") or None, env.get(key_var) or None


def embedder_options() -> dict:
    """Per-user options every embedder factory receives (today only the minilm weights folder)."""
    own = user_file().get("embedder", {})
    return {"model_path": own["model_path"]} if own.get("model_path") else {}


def _truthy(v) -> bool:
    return str(v).strip().lower() in {"1", "true", "yes", "on"}
