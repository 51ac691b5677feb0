"""A pytest plugin for `.ci/memcheck address`: LeakSanitizer's check, run
once the tests are done, failing the run on any leak the CPU extension
allocated.

Why not LeakSanitizer's own check at exit with suppressions: a suppression
silences a leak when it matches any frame of the allocation's stack, and
every allocation the extension makes is called from jaxlib, and lies in a
module whose path holds "python3" (site-packages). The patterns needed to
quiet Python's and jaxlib's own exit-time leaks therefore silenced the
extension's too. Here the check runs while the interpreter is still whole
(so what Python and jax hold is reachable and not reported), and a leak
counts when a frame of its stack lies in the extension's module: the others
(jaxlib's, numpy's) are counted in one line and let be.
"""

from __future__ import annotations

import ctypes
import gc
import os
import re
import tempfile

import pytest

EXTENSION = "_cpu_ext"


def leak_reports(report: str) -> list[str]:
    """The report's leaks, one text each: a "Direct leak" or "Indirect leak"
    header and the stack under it."""
    starts = [m.start() for m in re.finditer(r"^(Direct|Indirect) leak of", report, re.M)]
    return [report[s:e].rstrip() for s, e in zip(starts, starts[1:] + [len(report)])]


def run_leak_check() -> str:
    """LeakSanitizer's recoverable check, its report (written to file
    descriptor 2) caught in a file; empty where there are no leaks."""
    check = ctypes.CDLL(None).__lsan_do_recoverable_leak_check
    with tempfile.TemporaryFile() as caught:
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        try:
            check()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        caught.seek(0)
        return caught.read().decode(errors="replace")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    import jax

    jax.clear_caches()  # compiled programs hold buffers, not leaks
    gc.collect()
    leaks = leak_reports(run_leak_check())
    ours = [leak for leak in leaks if EXTENSION in leak]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reporter.write("\n")  # after the progress line, which the reporter does not track
    reporter.write_line(f"leak check: {len(ours)} leak(s) allocated by {EXTENSION}, "
                        f"{len(leaks) - len(ours)} elsewhere (jaxlib, numpy, Python: not judged)")
    if ours:
        for leak in ours[:5]:
            reporter.write_line(leak)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
