"""The benchmarks (a face): speed side by side with the peers and the hardware limit (`make bench`,
docs/benchmarks.md), the scale table (docs/scale.md) and retrieval quality on public data
(`make bench-quality`, docs/quality.md). Stores are built here through the public `Store`; nothing
in the product imports this package."""
