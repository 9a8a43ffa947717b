# memstore — two commands set everything up: `make install`, then `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
SHARED ?= ../shared
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install lint test test-slow demo search-sample bench bench-versus bench-scale bench-ann bench-import compat bench-quality docs clean

# ContextTape from PyPI, for the default suite's round trip, lives in its own venv (.bench/ctvenv)
# because it installs a command named `ct` too; the script returns at once when it is there.
install: $(BIN)/ct
	PY=$(PY) bash scripts/ct_venv.sh
	@# MiniLM's ONNX graph, keyed by its version and the weights: built when missing (~2 s, offline), else 0.3 s.
	@$(BIN)/python -m memstore.adapters.minilm >/dev/null
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then echo "Installing chromium + chromium-driver for the browser tests (tests/test_web.py)"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; fi; fi

$(BIN)/ct: pyproject.toml constraints.txt memstore/tree/_words.c memstore/secrets/_quiet.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[test,reference,langchain,llamaindex,ann]'
	touch $(BIN)/ct

lint: install
	$(BIN)/ruff check memstore tests scripts
	$(BIN)/ruff format --check memstore tests scripts

test: install
	$(BIN)/python -m pytest -n 2 -q

test-slow: install
	$(BIN)/python -m pytest -q -m slow

# The main job on the bundled sample store: a search.
search-sample: install
	$(BIN)/ct -C sample_store search "what did we decide about the budget"

demo: install
	bash scripts/demo.sh

bench: install
	$(BIN)/python -m memstore.bench.speed --out docs/benchmarks.md

# This checkout beside another source tree (git worktree add DIR COMMIT), timed in turn: add, search, context, forget.
bench-versus: install
	@test -n "$(OTHER)" || { echo "usage: make bench-versus OTHER=DIR (a memstore source tree, e.g. git worktree add /tmp/before HEAD~1)"; exit 2; }
	$(BIN)/python -m memstore.bench.versus --other $(OTHER)

# A big import: one write of 10k and of 100k LongMemEval dev turns, topics on, vectors given
# (records/s per part of the write, and how it scales); minutes.
bench-import: install
	$(BIN)/python -m memstore.bench.imports --data $(SHARED)/bench-data/longmemeval $(ARGS)

# The scale table alone, with the 1M-record store (built once under .bench/, minutes).
bench-scale: install
	$(BIN)/python -m memstore.bench.scale --with-1m

# memstore's opt-in IVF beside chromadb's HNSW on the same 100k vectors (docs/ann-vs-hnsw.md). chromadb
# is pinned in its own venv (.bench/chromavenv, scripts/chroma_venv.sh), never in ours; ~2 min.
# ARGS="--n 1000000" runs it at 1M (chromadb's HNSW build alone ~10 min on 2 cores).
bench-ann: install
	PY=$(PY) bash scripts/chroma_venv.sh
	$(BIN)/python -m memstore.bench.ann_vs_hnsw $(ARGS)

# ContextTape's own ISStore/MultiStore (from PyPI, in .bench/ctvenv) open `ct export contexttape` output and
# find the same top hits as `ct search --mode vector`; a store ContextTape wrote imports with `ct import contexttape`.
compat: install
	$(BIN)/python -m pytest -q tests/test_contexttape_roundtrip.py

bench-quality: install
	$(BIN)/python -m memstore.bench.quality --data $(SHARED)/bench-data --out docs/quality.md \
		--echo-real docs/echo-real.json

clean:
	rm -rf $(VENV) .pytest_cache
