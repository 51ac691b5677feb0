"""numpy.searchsorted in another Python, as a peer of the searchsorted family.

A numpy release may need a newer Python than the one jaxsearch runs in
(numpy 2.5, whose batched search differs from 2.4's, needs Python 3.12):
``jaxsearch bench --numpy-python PATH`` times that interpreter's numpy too.
It runs as a worker process that loads each problem's arrays from .npy files
and searches them on request; a timed call is one request, answered once the
search is done, so each time holds a round trip over a pipe (tens of
microseconds) besides the search. Its answers are compared with this
numpy's once per problem, outside the timing.
"""

from __future__ import annotations

import atexit
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .peers import Impl, Inputs

# The worker: answers "load A V", "run" and "save OUT" with "ok" once done.
WORKER = """
import sys
import numpy as np
print(np.__version__, sys.version.split()[0], flush=True)
a = v = None
for line in sys.stdin:
    command, *paths = line.split()
    if command == "load":
        a, v = np.load(paths[0]), np.load(paths[1])
    elif command == "run":
        np.searchsorted(a, v)
    elif command == "save":
        np.save(paths[0], np.searchsorted(a, v))
    print("ok", flush=True)
"""


class NumpyWorker:
    """A worker process running WORKER in `python`, and its scratch folder."""

    def __init__(self, python: str) -> None:
        try:
            self.process = subprocess.Popen([python, "-c", WORKER], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, text=True)
        except OSError as e:
            raise ValueError(f"--numpy-python {python}: cannot run it ({e})") from e
        banner = self.process.stdout.readline().split() if self.process.stdout else []
        if len(banner) != 2:
            self.process.kill()
            raise ValueError(f"--numpy-python {python}: it does not import numpy "
                             f"(pip install numpy into that Python)")
        self.numpy_version, self.python_version = banner
        self.folder = tempfile.TemporaryDirectory(prefix="jaxsearch-numpy-")
        atexit.register(self.close)

    def ask(self, line: str) -> None:
        """Send one command and wait for its "ok"."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        if self.process.stdout.readline().strip() != "ok":
            raise RuntimeError(f"the numpy {self.numpy_version} worker stopped")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.folder.cleanup()


def numpy_process_impl(python: str) -> Impl:
    """numpy.searchsorted in the Python at `python` (group "numpy": the
    ratios against numpy are against the faster of the two)."""
    worker = NumpyWorker(python)
    folder = Path(worker.folder.name)

    def build(x: Inputs) -> Callable[[], Any]:
        np.save(folder / "a.npy", x.a)
        np.save(folder / "v.npy", x.v)
        worker.ask(f"load {folder / 'a.npy'} {folder / 'v.npy'}")
        worker.ask(f"save {folder / 'out.npy'}")
        if not np.array_equal(np.load(folder / "out.npy"), np.searchsorted(x.a, x.v)):
            raise AssertionError(f"numpy {worker.numpy_version}'s answers differ from "
                                 f"numpy {np.__version__}'s")
        return lambda: worker.ask("run")

    return Impl(f"numpy {worker.numpy_version} (Python {worker.python_version})", "numpy",
                build, checked=False)
