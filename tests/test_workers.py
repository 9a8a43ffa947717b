"""A big write's pure work on two cores (memstore/workers.py): the same answers as one core, whatever
the child does."""

from __future__ import annotations

import copy
import itertools
import json
import os
import threading

import pytest

from memstore import workers
from memstore.format import tree as treefmt
from memstore.tree import naming


THREADS = threading.active_count


@pytest.fixture
def forks(monkeypatch):
    """The pids of the children split_map forked (os.fork counted in the parent)."""
    made: list[int] = []
    real = os.fork

    def counted():
        pid = real()
        if pid:
            made.append(pid)
        return pid

    monkeypatch.setattr(workers.os, "fork", counted)
    # a test process may hold threads an earlier test left (a server's request thread): these
    # tests are about a single-threaded one, as `ct import` is
    monkeypatch.setattr(workers.threading, "active_count", lambda: 1)
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    return made


def test_half_of_the_items_are_computed_by_a_child(forks):
    items = list(range(1001))
    out, learnt = workers.split_map(
        lambda x: (x * x, os.getpid()), items, extra=lambda: [os.getpid()]
    )
    assert [v for v, _ in out] == [x * x for x in items]
    assert len(forks) == 1 and learnt == [forks[0]]
    assert {pid for _, pid in out[1::2]} == {forks[0]}  # odd positions: the child's
    assert {pid for _, pid in out[0::2]} == {os.getpid()}


@pytest.mark.parametrize("at", [0, 1, 333, 1000, 1001])
def test_a_contiguous_half_is_computed_by_a_child(forks, at):
    """With `at`, the child computes the items from `at` on (neighbours sharing one process's
    caches), the parent those before; the answers are in the items' order either way."""
    items = list(range(1001))
    out, _ = workers.split_map(lambda x: (x * x, os.getpid()), items, at=at)
    assert [v for v, _ in out] == [x * x for x in items]
    assert len(forks) == 1
    assert {pid for _, pid in out[at:]} <= {forks[0]} and {pid for _, pid in out[:at]} <= {
        os.getpid()
    }
    # a child that fails leaves its half to the parent, contiguous or not
    out, _ = workers.split_map(
        lambda x: os._exit(3) if workers._CHILD else x, list(range(300)), at=100
    )
    assert out == list(range(300))


def test_a_child_that_dies_costs_time_not_answers(forks):
    def fn(x):
        if workers._CHILD and x == 7:
            os._exit(3)  # killed mid-way, nothing sent
        return x + 1

    out, learnt = workers.split_map(fn, list(range(40)))
    assert out == [x + 1 for x in range(40)] and learnt == []
    assert len(forks) == 1


def test_answers_cross_the_pipe_as_json_and_bytes_only(forks):
    out, learnt = workers.split_map(
        lambda x: (x, bytes([x % 256]), {"k": x}), list(range(300)), extra=lambda: [b"\x00\xff"]
    )
    assert out[1] == [1, b"\x01", {"k": 1}] and out[0] == (0, b"\x00", {"k": 0})  # tuples: lists
    assert learnt == [b"\x00\xff"] and len(forks) == 1
    # what JSON cannot carry is computed by the parent instead (no loader that runs what it reads)
    got, learnt = workers.split_map(lambda x: {x}, list(range(10)))
    assert got == [{x} for x in range(10)] and learnt == [] and len(forks) == 2


def test_bytes_cross_the_pipe_raw_and_a_damaged_answer_is_refused():
    """Bytes (a chunk's word counts) follow the JSON as they are, not base64: a megabyte costs a
    megabyte; an answer cut short or pointing outside its raw part is refused (the parent then
    computes that part itself), never read as something else."""
    blob = bytes(range(256)) * 4096
    data = workers._dump([[1, blob, {"a": b""}], [b"x"]])
    assert len(data) < len(blob) + 200
    assert workers._load(data) == [[1, blob, {"a": b""}], [b"x"]]
    for bad in (data[:-1], data[:20], data[:4], b"", _with_raw([0, 10**9]), _with_raw([-1, 1])):
        with pytest.raises(ValueError):
            workers._load(bad)


def _with_raw(ref) -> bytes:
    head = json.dumps([[{"$raw": ref}], []]).encode()
    return len(head).to_bytes(8, "little") + head + b"abc"


def test_work_only_the_parent_may_do_is_left_to_it(forks):
    asked = []

    def rarity(terms):  # like RecordData.rarity: a weight not looked up yet needs SQL
        workers.parent_only() if terms else None
        asked.append(os.getpid())
        return {t: 1.0 for t in terms}

    jobs = [[f"Tell me about zorbling number {k} and the quarnix"] for k in range(600)]
    got = naming.offline_names(jobs, rarity)
    assert got == [naming.offline_name(texts, rarity) for texts in jobs]
    assert len(forks) == 1 and set(asked) == {os.getpid()}  # every weight looked up here


@pytest.mark.parametrize("why", ["env", "thread", "small"])
def test_no_child_where_it_is_not_safe_or_not_worth_it(forks, monkeypatch, why):
    stop = threading.Event()
    extra = None
    if why == "env":
        monkeypatch.setenv(workers.WORKERS_ENV, "1")
    elif why == "thread":
        monkeypatch.setattr(workers.threading, "active_count", THREADS)  # the real count
        extra = threading.Thread(target=stop.wait)
        extra.start()
    try:
        items = list(range(10 if why == "small" else 500))
        out, _ = workers.split_map(lambda x: -x, items, min_items=100)
    finally:
        stop.set()
        if extra is not None:
            extra.join()
    assert out == [-x for x in items] and forks == []


def _names(store) -> dict[tuple, tuple[str, str]]:
    tree = treefmt.read(store.root)
    return {tuple(t.records): (t.name, t.summary) for t in tree.topics.values() if t.records}


def test_a_big_write_names_its_topics_the_same_on_two_cores(tmp_path, forks, monkeypatch):
    from conftest import make_store
    from test_tree_speed import _distinct_turns

    from memstore.tree import assign, fanout

    one, two = make_store(tmp_path / "one"), make_store(tmp_path / "two")
    turns = _distinct_turns(one, 700)  # the same records (ids too) for both

    def write(store):
        # topic ids are random, and regrouping breaks ties by id: the same ids in both stores
        ids = (f"t{k:011d}" for k in itertools.count())
        monkeypatch.setattr(fanout, "new_topic_id", lambda: next(ids))
        monkeypatch.setattr(assign.treefmt, "new_topic_id", lambda: next(ids))
        store.write(copy.deepcopy(turns), "Import 700 turns")

    monkeypatch.setenv(workers.WORKERS_ENV, "1")
    write(one)
    assert forks == []
    monkeypatch.delenv(workers.WORKERS_ENV)
    write(two)
    assert len(forks) >= 1
    names = _names(two)
    assert len(names) >= naming.MANY_JOBS and names == _names(one)
    groups = lambda st: sorted(  # noqa: E731
        (t.name, t.summary) for t in treefmt.read(st.root).topics.values() if not t.records
    )
    assert groups(two) == groups(one)


def test_a_big_write_s_words_are_counted_from_its_start_and_stopped_with_it(
    tmp_path, forks, monkeypatch
):
    """A big write's turns have their words counted by a child forked as soon as the write knows
    its records, before it embeds and writes them (Core.place_ahead), and placement counts with
    that child: the tree is the one a single core makes. A write that fails before placing stops
    the child."""
    import numpy as np

    from conftest import make_store
    from test_tree_speed import _distinct_turns

    from memstore.errors import FormatError
    from memstore.tree import assign, fanout, termsets

    monkeypatch.setattr(assign, "COUNT_BESIDE", 100)
    one, two = make_store(tmp_path / "one"), make_store(tmp_path / "two")
    turns = _distinct_turns(one, 300)
    seen: list[str] = []  # the write's stages so far, when a count was started
    started: list[tuple] = []
    beside = termsets.TermSets.beside

    def counted(self, texts):
        started.append((tuple(seen), len(texts)))
        return beside(self, texts)

    monkeypatch.setattr(termsets.TermSets, "beside", counted)

    class Stages:
        def stage(self, desc, total=None):
            seen.append(desc)

        def __call__(self, n=1):
            pass

    def write(store, **kw):
        ids = (f"t{k:011d}" for k in itertools.count())
        monkeypatch.setattr(fanout, "new_topic_id", lambda: next(ids))
        monkeypatch.setattr(assign.treefmt, "new_topic_id", lambda: next(ids))
        seen.clear()
        return store.write(copy.deepcopy(turns), "Import 300 turns", progress=Stages(), **kw)

    monkeypatch.setenv(workers.WORKERS_ENV, "1")
    write(one)
    monkeypatch.delenv(workers.WORKERS_ENV)
    write(two)
    assert started[-1] == ((), 300)  # before the write's first stage, every turn
    assert len(forks) >= 2  # (the counting child, the files beside)
    assert _names(two) == _names(one)
    # a write refused before it places anything: its counting child is stopped and reaped
    del started[:], forks[:]
    bad = {id(r): np.full(one.embedder.dim, np.nan, np.float32) for r in turns}
    fresh = make_store(tmp_path / "three")
    with pytest.raises(FormatError):
        recs = copy.deepcopy(turns)
        fresh.write(recs, "NaN", given_vectors={id(r): bad[id(t)] for r, t in zip(recs, turns)})
    assert len(started) == 1 and len(forks) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(forks[0], os.WNOHANG)
    assert fresh._ahead is None


def test_a_big_write_is_scanned_for_secrets_on_two_cores(forks):
    from memstore.errors import SecretsFound
    from memstore.secrets import policy

    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    recs = [
        {
            "id": f"r{k}",
            "ts": "2026-11-01T00:00:00Z",
            "role": "user",
            "session": "s",
            "text": f"note {k}: my token is {token}" if k in (7, 1500) else f"note {k} about bread",
        }
        for k in range(2_400)
    ]
    kept, notes = policy.apply(copy.deepcopy(recs), "redact")
    assert len(forks) == 1 and len(kept) == 2_400 and len(notes) == 2
    assert [r["id"] for r in kept if token in r["text"]] == []
    assert kept[7]["meta"]["redacted"] and kept[1500]["meta"]["redacted"]
    with pytest.raises(SecretsFound) as err:
        policy.apply(copy.deepcopy(recs), "refuse")
    said = str(err.value)
    assert said.count("github-token") == 2 and "note 7:" in said and "note 1500:" in said
    assert token not in said


def test_placement_keeps_numpy_to_one_blas_thread(tmp_path, monkeypatch):
    from threadpoolctl import threadpool_info

    from conftest import make_store
    from test_tree_speed import _distinct_turns

    from memstore.tree import assign

    def blas_threads() -> set[int]:
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    seen = []
    real = assign._assign

    def spy(*a, **k):
        seen.append(blas_threads())
        return real(*a, **k)

    monkeypatch.setattr(assign, "_assign", spy)
    monkeypatch.setattr(assign, "ONE_BLAS_THREAD_FROM", 20)
    store = make_store(tmp_path / "s")
    before = blas_threads()
    store.add("How do I keep a sourdough starter alive?")  # a small write: BLAS left as it is
    store.write(_distinct_turns(store, 30), "Import 30 turns")
    assert (
        seen == [before, {1}] and blas_threads() == before
    )  # one thread while placing a big write
    if workers.cores() >= 2 and not os.environ.get("OPENBLAS_NUM_THREADS"):
        assert max(before) >= 2  # (numpy's default here: the limit is what made it one)


def test_the_progress_bar_starts_no_thread(monkeypatch, capsys):
    """`ct import` on a terminal shows tqdm bars; tqdm's monitor thread would keep the write from
    forking its second process."""
    import sys

    from memstore.cli.common import _Bar

    class Ctx:
        quiet = False

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    before = THREADS()
    with _Bar(Ctx(), "Importing", 100) as bar:
        bar.stage("Placing in topics", 100)
        bar(50)
        assert bar.bar is not None and THREADS() == before


def test_a_stream_sends_its_chunks_in_order_and_stops_when_its_child_dies(forks):
    """workers.Stream: a forked child computes chunk after chunk ahead; the parent reads them in
    order; a child that dies mid-way ends the stream (None), and the caller computes the rest."""
    items = list(range(25))
    stream = workers.Stream(
        lambda xs: [(x * x, os.getpid()) for x in xs], [items[i : i + 10] for i in range(0, 25, 10)]
    )
    got = [stream.next() for _ in range(4)]
    assert [v for chunk in got[:3] for v, _pid in chunk] == [x * x for x in items]
    assert {pid for chunk in got[:3] for _v, pid in chunk} == {forks[0]} and got[3] is None
    assert stream.pid is None  # reaped

    def dies(xs):
        if workers._CHILD and xs[0] >= 10:
            os._exit(3)
        return xs

    stream = workers.Stream(dies, [items[i : i + 10] for i in range(0, 25, 10)])
    assert stream.next() == list(range(10)) and stream.next() is None and stream.next() is None


def test_a_stream_s_answer_goes_into_its_pipe_at_once(forks):
    """A Stream's pipe holds PIPE_BYTES where Linux lets a user have that much (its default
    pipe-max-size), so a counted chunk (about 0.7 MB) is written whole while the parent places
    turns, and the parent reads it without waiting for the child to refill a 64 KB pipe; the
    child then writes a chunk of that size without anybody reading."""
    import fcntl
    import time
    from pathlib import Path

    limit = Path("/proc/sys/fs/pipe-max-size")
    if not hasattr(fcntl, "F_GETPIPE_SZ") or not limit.exists():
        pytest.skip("pipe sizes are Linux's")
    if int(limit.read_text()) < workers.PIPE_BYTES:
        pytest.skip("this machine's pipe-max-size is lowered")
    big = 700_000
    stream = workers.Stream(lambda n: [b"x" * n], [big, big])
    try:
        assert fcntl.fcntl(stream.pipe.fileno(), fcntl.F_GETPIPE_SZ) >= workers.PIPE_BYTES
        time.sleep(1.0)  # the child has written its first answer whole, nobody reading
        assert stream.ready()
        waited = time.perf_counter()
        assert stream.next() == [b"x" * big]
        assert time.perf_counter() - waited < 0.5
    finally:
        stream.close()


def test_a_stream_s_child_computes_ahead_of_a_parent_that_does_not_read(
    forks, tmp_path, monkeypatch
):
    """A Stream's child keeps the answers its pipe cannot take yet and goes on computing (a stream
    started while its parent still prepares the write gets that far ahead), up to AHEAD_BYTES kept;
    the parent then reads every answer, in order, whole."""
    import time

    done = tmp_path / "done"

    def job(n):
        with open(done, "a") as f:
            f.write(f"{n}\n")
        return [bytes([n]) * 700_000]

    jobs = list(range(10))  # 7 MB: several times what the pipe holds
    stream = workers.Stream(job, jobs)
    try:
        for _ in range(100):  # nobody reads meanwhile
            if done.exists() and len(done.read_text().split()) == len(jobs):
                break
            time.sleep(0.05)
        assert done.read_text().split() == [str(n) for n in jobs]
        assert [stream.next() for _ in jobs] == [[bytes([n]) * 700_000] for n in jobs]
        assert stream.next() is None
    finally:
        stream.close()
    # beyond AHEAD_BYTES kept, the child waits for the parent to read
    monkeypatch.setattr(workers, "AHEAD_BYTES", 1_000_000)
    done.unlink()
    stream = workers.Stream(job, jobs)
    try:
        time.sleep(1.5)
        ahead = len(done.read_text().split())
        assert 2 <= ahead <= 4  # (what the pipe took, what is kept, the one waiting to go)
        assert [stream.next() for _ in jobs] == [[bytes([n]) * 700_000] for n in jobs]
        assert len(done.read_text().split()) == len(jobs)
    finally:
        stream.close()


def test_a_big_write_s_words_are_counted_ahead_by_a_child(forks):
    """Placement's key terms of topic windows (tree/termsets.py) with the texts counted ahead by a
    forked child are naming.term_set's, and naming's key terms from those counts (each term in its
    most common surface form, whose term the child told) naming.key_terms': with every count taken
    from the child (the parent then counted none itself), with the parent not waiting for a child
    behind it, and with the child killed half-way (the parent counts the rest)."""
    import random

    from memstore.tree.termsets import TermSets

    rng = random.Random(5)
    vocab = [f"w{n}x" for n in range(300)] + ["Sarah", "Paris", "bike", "bikes"]
    vocab += ["Bikes", "Biking", "PARIS", "Sarah's", "cakes", "Cake", "caking"]
    texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 30))) for _ in range(1200)]
    for how in ("taken", "not waited for", "killed"):
        sets = TermSets()
        sets.top(texts[:3], 5)  # words this process met before the fork
        sets.beside(texts)
        # words met here first, after the fork: the child numbers its new words otherwise
        first = ["Zeppelins quixotic marmalade, Zeppelin"]
        assert sets.top(first, 3) == naming.term_set(first, 3)
        if how == "taken":
            while sets.waiting and sets._receive():  # (every count, waiting for each)
                pass
        if how == "killed":
            os.kill(sets.stream.pid, 9)
        for i in range(len(texts)):
            window = texts[max(0, i - 7) : i + 1]
            assert sets.top(window, 12) == naming.term_set(window, 12)
            assert sets.key_terms(window, 6) == naming.key_terms(window, 6)
        sets.close()
        assert sets.stream is None
        if how == "taken":
            assert sets.here == 4  # (those before the fork and the one after)
        if how == "killed":
            assert sets.here > 600
    assert len(forks) == 3


def test_an_in_process_embedder_embeds_half_of_a_big_write_in_a_child(forks, monkeypatch):
    """The hash embedder's vectors of a big write: the second half of the batches embedded by a
    forked child, the same bytes as on one core, and every record's progress shown once."""
    import numpy as np

    from memstore.adapters.hashing import HashEmbedder
    from memstore.turn_embedding import BATCH, TWO_CORES_FROM, record_vectors

    n = BATCH * TWO_CORES_FROM + 37
    records = [{"role": "user" if i % 2 else "assistant", "type": "text"} for i in range(n)]
    texts = [
        f"Turn {i} about apples number {i % 97}. It has a second sentence {i % 13} here."
        for i in range(n)
    ]
    shown: list[int] = []
    two = record_vectors(HashEmbedder(), records, texts, shown.append)
    assert len(forks) == 1 and sum(shown) == n
    monkeypatch.setenv(workers.WORKERS_ENV, "1")
    shown.clear()
    one = record_vectors(HashEmbedder(), records, texts, shown.append)
    assert len(forks) == 1 and sum(shown) == n
    assert two.tobytes() == one.tobytes() and np.count_nonzero(np.abs(two).sum(axis=1)) == n
    # a child that dies leaves its half to the parent: the same vectors, progress shown once
    monkeypatch.delenv(workers.WORKERS_ENV)
    monkeypatch.setattr(workers, "_dump", lambda obj: os._exit(3))
    shown.clear()
    again = record_vectors(HashEmbedder(), records, texts, shown.append)
    assert len(forks) == 2 and sum(shown) == n and again.tobytes() == one.tobytes()
