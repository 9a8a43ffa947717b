"""`ct bench`: the speed benchmark (the same harness as `make bench`)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("bench")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the Markdown report to FILE (make bench uses docs/benchmarks.md).",
)
@click.option(
    "--sizes",
    default="10000,100000",
    show_default=True,
    help="Synthetic store sizes, comma-separated.",
)
@click.option(
    "--per-day",
    default=100,
    show_default=True,
    type=click.IntRange(1),
    help="Records per day in those stores.",
)
@click.option(
    "--queries",
    default=30,
    show_default=True,
    type=click.IntRange(1),
    help="Distinct queries per size.",
)
@click.option(
    "--repeats",
    default=3,
    show_default=True,
    type=click.IntRange(1),
    help="Timed passes over the queries.",
)
@click.option(
    "--ingest-n",
    default=256,
    show_default=True,
    type=click.IntRange(1),
    help="Records written in the ingest-overhead measurement.",
)
@click.option(
    "--base",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".bench"),
    show_default=True,
    help="Where the built stores (and ContextTape's virtualenv) are cached.",
)
@click.option(
    "--contexttape/--no-contexttape",
    default=True,
    show_default=True,
    help="Compare with ContextTape's ISStore.search_by_vector (needs its own virtualenv; created if missing).",
)
@click.option(
    "--minilm/--no-minilm", default=True, show_default=True, help="Also time the MiniLM embedder."
)
@click.option(
    "--million",
    default=1_000_000,
    show_default=True,
    type=click.IntRange(0),
    help="Rows of the directly filled index timed for warm hybrid search at scale (0 skips it).",
)
@click.option(
    "--ann-sizes",
    default="250000,500000,1000000",
    show_default=True,
    help="Sizes at which the IVF index is compared with the exact scan, comma-separated.",
)
@click.option(
    "--public-sizes",
    default="1000000",
    show_default=True,
    help="More synthetic stores (built once, cached) timed only for the public Store.search and a "
    "fresh `ct search`, comma-separated; empty skips them.",
)
def bench_cmd(
    out,
    sizes,
    per_day,
    queries,
    repeats,
    ingest_n,
    base,
    contexttape,
    minilm,
    million,
    ann_sizes,
    public_sizes,
):
    """Measure search, index and ingest speed beside a bare numpy scan and ContextTape.

    Builds (once, cached under --base) synthetic stores of each size and prints a table with every
    speed budget of the product (each row says its limit) marked pass or fail; exit status 1 when a budget fails.

    Example: ct bench --sizes 10000 --no-contexttape
    """
    from ..bench.speed import run_cli

    command = (
        "ct bench"
        + (f" --sizes {sizes}" if sizes != "10000,100000" else "")
        + (f" --out {out}" if out else "")
    )
    try:
        code = run_cli(
            out=out,
            sizes=sizes,
            per_day=per_day,
            queries=queries,
            repeats=repeats,
            ingest_n=ingest_n,
            base=base,
            contexttape=contexttape,
            minilm=minilm,
            command=command,
            million=million,
            ann_sizes=ann_sizes,
            public_sizes=public_sizes,
        )
    except (RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    raise SystemExit(code)
