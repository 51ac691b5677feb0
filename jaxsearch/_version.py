"""The version, read by the package, `jaxsearch info` and the benchmarks' records."""

__version__ = "0.1.0"
