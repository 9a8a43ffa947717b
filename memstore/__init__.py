"""memstore: a git-native memory store for people and LLM agents."""

__version__ = "0.1.0"

FORMAT_VERSION = 3
# Formats this code reads; writes need FORMAT_VERSION (`ct upgrade` turns format 1 or 2 into 3).
READABLE_FORMATS = (1, 2, 3)


def __getattr__(name):
    # The Python API is imported lazily so that `import memstore` (and `ct --help`) stays instant.
    if name in ("Store",):
        from .store import Store

        return Store
    from .api import RESULT_TYPES

    if name in RESULT_TYPES or name == "Stats":
        from . import api

        return getattr(api, name)
    raise AttributeError(name)
