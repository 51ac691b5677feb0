"""Tune jaxsearch's kernels for this machine: ``python -m jaxsearch.autotune``
and the ``jaxsearch-autotune`` command, aliases of ``jaxsearch autotune``
(scripts run them). The command line lives in :mod:`jaxsearch.tools.cli.autotune`."""

import sys

from .tools.cli.autotune import main

if __name__ == "__main__":
    sys.exit(main())
