"""Rebuild sample_store/ from examples/: a few weeks of dated turns and a handful of documents.

The store is built through the real write path (git, the default embedder), then copied without
its .git folder, so the project commits it as plain files that read commands use as they are.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def main(dest: Path = HERE / "sample_store") -> None:
    from memstore.ingest.path import ingest_path
    from memstore.ingest.run import import_source
    from memstore.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        st = Store.init(Path(tmp) / "s", embedder="minilm", timezone="Europe/Berlin")
        import_source(st, "jsonl", HERE / "examples" / "conversations.jsonl")
        ingest_path(st, HERE / "examples" / "docs")
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(st.root, dest, ignore=shutil.ignore_patterns(".git", ".memstore"))
        leaks = [
            p
            for p in dest.rglob("*")
            if p.is_file()
            and any(
                s.encode() in p.read_bytes() for s in (str(HERE), str(Path(tmp).resolve()), tmp)
            )
        ]
    if (
        leaks
    ):  # committed data must not name this machine's folders (docs/format.md, "Document sources")
        raise SystemExit(f"absolute paths of this machine found in {', '.join(map(str, leaks))}")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "sample_store")
