"""``python -m jaxsearch`` (also the ``jaxsearch`` command): the command line
of :mod:`jaxsearch.tools.cli.main`."""

import sys

from .tools.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
