"""`memstore.toml`: format version, store id, timezone, embedder and settings."""

from __future__ import annotations

import tomllib
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .. import FORMAT_VERSION, READABLE_FORMATS
from ..errors import FormatError, VersionError

FILENAME = "memstore.toml"

DEFAULT_SETTINGS = {
    "chunk_tokens": 200,
    "chunk_overlap": 32,
    "vector_dtype": "float32",
    # A write that finds this many packs in a day it touches consolidates the day into one pack.
    "consolidate_packs": 8,
}


@dataclass
class Config:
    store_id: str
    timezone: str
    embedder: dict
    settings: dict = field(default_factory=lambda: dict(DEFAULT_SETTINGS))
    format_version: int = FORMAT_VERSION

    @classmethod
    def new(cls, timezone: str, embedder: dict, dtype: str = "float32") -> "Config":
        emb = {"name": embedder["name"], "model": embedder["model"], "dim": int(embedder["dim"]), "dtype": dtype}
        for key, value in embedder.items():
            emb.setdefault(key, value)
        return cls(store_id=str(uuid.uuid4()), timezone=timezone, embedder=emb)

    def setting(self, key: str):
        return self.settings.get(key, DEFAULT_SETTINGS.get(key))

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


def read(root: Path) -> Config:
    """Read and check memstore.toml; the version is checked before anything else is trusted."""
    path = Path(root) / FILENAME
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(path, f"not valid TOML ({exc})") from None
    version = data.get("format_version")
    if not isinstance(version, int):
        raise FormatError(path, "missing integer 'format_version'")
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
    settings.update(data.get("settings") or {})
    return Config(
        store_id=str(data.get("store_id", "")),
        timezone=str(data.get("timezone", "UTC")),
        embedder=dict(emb),
        settings=settings,
        format_version=version,
    )
