"""The README's speed table, measured on this machine and written in place.

Times the default call `jaxsearch.searchsorted(a, v)` against
`jnp.searchsorted(a, v)` (jnp's default method, "scan") and
`numpy.searchsorted(a, v)` on the main job's problems (float32 keys:
N = M = 1e7 sorted, both skews, 1e6 unsorted needles, a small one), side by
side in one process, each answer checked against numpy's. The Markdown
table, with the machine, the versions and this command under it, replaces
what stands between the README's two marker lines; nothing is written if an
answer was wrong.

    python bench/speed_table.py [--readme README.md] [--repeats 7] [--print-only]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

START = "<!-- speed-table:start -->"
END = "<!-- speed-table:end -->"
COMMAND = "python bench/speed_table.py"
README = Path(__file__).resolve().parents[1] / "README.md"

# Column names of the peers, in the table's order, by the harness's impl names.
PEERS = {"jaxsearch": "jaxsearch", "jnp scan": "jnp (default)", "numpy": "numpy"}


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def _ratio(x: float) -> str:
    return f"{x:.2g}x" if x < 10 else f"{x:.0f}x"


def markdown_table(results: Sequence, meta: dict) -> str:
    """The table: a row per problem, each peer's median in ms, and how many
    times jaxsearch's time each of the others took; then its conditions."""
    from jaxsearch.tools.bench.format import fmt_count

    by_problem: dict = {}
    for r in results:
        by_problem.setdefault(r.problem, {})[r.impl] = r.seconds
    lines = ["| N keys | M needles | needles | jaxsearch | jnp (default) | numpy "
             "| jnp / jaxsearch | numpy / jaxsearch |",
             "|--:|--:|---|--:|--:|--:|--:|--:|"]
    for p, t in by_problem.items():
        ours = t["jaxsearch"]
        cells = [fmt_count(p.n), fmt_count(p.m), "sorted" if p.sorted_v else "unsorted",
                 *(f"{_ms(t[k])} ms" for k in PEERS),
                 _ratio(t["jnp scan"] / ours), _ratio(t["numpy"] / ours)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"float32 keys and needles; medians of up to {meta['repeats']} calls under "
        f"`jax.jit`, the three peers interleaved in one process, every answer equal to "
        f"numpy's. {meta['cpu_model']}, {meta['cores']} cores, jax {meta['jax']}, numpy "
        f"{meta['numpy']}, jaxsearch {meta['jaxsearch']}, {meta['date'][:10]}. "
        f"Measured and written here by `{COMMAND}`.",
    ]
    return "\n".join(lines)


def replace_between_markers(text: str, table: str) -> str:
    """`text` with what stands between the marker lines replaced by `table`."""
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise ValueError(f"the README needs the lines {START} and {END}, in that order")
    return f"{head}{START}\n{table}\n{END}{tail}"


def measure(repeats: int) -> tuple[list, dict]:
    """The peers' results on the main job's problems, and the machine they ran on."""
    from jaxsearch.tools.bench.peers import jaxsearch_impl, jnp_impl, numpy_impl
    from jaxsearch.tools.bench.searchsorted import main_job_problems
    from jaxsearch.tools.bench.suite import run_suite
    from jaxsearch.tools.bench.timing import Progress, machine_info

    problems = main_job_problems()
    results = run_suite(problems, [jaxsearch_impl(None), jnp_impl("scan"), numpy_impl()],
                        repeats=repeats, max_call_s=30.0,
                        progress=Progress(len(problems), "speed table"))
    return results, {**machine_info(), "repeats": repeats}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/speed_table.py",
        description="Measure the README's speed table on this machine and write it between "
                    "the README's marker lines.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--readme", type=Path, default=README, help="the file to write into")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls per peer and problem")
    parser.add_argument("--print-only", action="store_true",
                        help="print the table, write nothing")
    args = parser.parse_args(argv)
    results, meta = measure(args.repeats)
    # Every cell timed, and every answer checked equal to numpy's, or nothing is written.
    bad = [f"{r.impl} on {r.problem.label}: {r.skipped or 'answers differ from numpy'}"
           for r in results if r.seconds is None or r.correct is not True]
    if bad:
        print("not written:", *bad, sep="\n  ", file=sys.stderr)
        return 1
    table = markdown_table(results, meta)
    print(table)
    if not args.print_only:
        args.readme.write_text(replace_between_markers(args.readme.read_text(), table))
        print(f"wrote the table into {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
