"""The tools: the benchmark harness (`bench`), the autotuner (`autotune`),
which measures through that harness, and the command line (`cli`). They
use the library, the tuning layer and the kernels; nothing but the command
line and its entry points (`jaxsearch.__main__`, `jaxsearch.autotune`)
imports them.
"""
