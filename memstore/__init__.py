"""memstore: a git-native memory store for people and LLM agents.

`from memstore import Store` (the facade, memstore/store.py) and every result type
(memstore/results.py) load lazily, so `import memstore` (and `ct --help`) stays instant."""

__version__ = "0.1.0"

FORMAT_VERSION = 3
# Formats this code reads; writes need FORMAT_VERSION (`ct upgrade` turns format 1 or 2 into 3).
READABLE_FORMATS = (1, 2, 3)


def __getattr__(name):
    if name == "Store":
        from .store import Store

        return Store
    import importlib

    results = importlib.import_module("memstore.results")
    if name in results.RESULT_TYPES:
        return getattr(results, name)
    raise AttributeError(name)
