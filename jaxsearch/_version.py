"""The version, read by the package, `jaxsearch info` and the benchmarks' records.

It is written once, in meson.build (`project(..., version: ...)`): meson-python
puts it in the installed package's metadata (pyproject.toml declares the
version dynamic), and it is read from there, so a wheel and an editable
install both report the version they were built from.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _metadata_version

try:
    __version__ = _metadata_version("jaxsearch")
except PackageNotFoundError:  # a copy of the package that pip never installed
    __version__ = "0+unknown"
