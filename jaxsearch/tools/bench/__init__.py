"""The benchmark harness: timing (`timing`), problems and peers (`peers`),
grids (`suite`), tables, JSON and plots (`report`, `format`, `plot`), and
the benchmark families (`searchsorted`, `resampling`).
"""
