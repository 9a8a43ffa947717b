#!/usr/bin/env bash
# Create (once) the virtualenv that holds chromadb from PyPI, for the optional ANN benchmark
# (memstore/bench/ann_vs_hnsw.py, `make bench-ann`). It stays out of the project's venv and its
# default install. Idempotent: returns at once when the venv already has this version.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${CHROMA_VENV:-.bench/chromavenv}"
VERSION="${CHROMA_VERSION:-1.5.9}"
PY="${PY:-python3}"
mkdir -p "$(dirname "$VENV")"
if command -v flock >/dev/null; then
  exec 9>"$VENV.lock"
  flock 9
fi
if [ -x "$VENV/bin/python" ] && compgen -G "$VENV/lib/python*/site-packages/chromadb-$VERSION.dist-info" >/dev/null; then
  exit 0
fi
echo "Creating $VENV with chromadb==$VERSION from PyPI…" >&2
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "chromadb==$VERSION" >&2
"$VENV/bin/python" -c "import chromadb; print('chromadb', chromadb.__version__, 'in $VENV')" >&2
