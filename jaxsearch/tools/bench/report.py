"""The searchsorted benchmarks' reports: the main job's blocks, the full
benchmark's tables, and their JSON (written, and read back to re-plot a saved
run). Every table explains itself: a legend of its words, and a footnote for
every empty cell."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence
from typing import Any

from .format import (
    MARKER_TEXT,
    MEDIAN_TEXT,
    Footnotes,
    fmt_gbps,
    fmt_ms,
    fmt_x,
    format_legend,
    format_table,
    group_by_problem,
)
from .peers import COPY_NAME, JAX_FLOOR_NAME, Problem
from .suite import (
    NOT_APPLICABLE,
    PEER_GROUPS,
    Result,
    bandwidth,
    problem_summary,
    ratio,
    reference_members,
    why_no_bandwidth,
    why_untimed,
)
from .timing import timing_from_json, timing_json

HEADLINE = "jaxsearch"  # the drop-in call (sorted_v=None) that tables lead with

# What the tables, the JSON and the plot mean by their words, said once for all.
PROBLEM_TEXT = ("N = len(a) sorted keys, M = len(v) needles, the dtype of both, and whether v "
                'is sorted too; every search asks for side="left" (the default)')
CORRECT_TEXT = ('the output equals numpy.searchsorted(a, v, side="left") element for element '
                "(floors are not checked)")
COPY_TEXT = ("a plain numpy copy of the bytes of a and v into a fresh buffer (on an accelerator, "
             "one jitted elementwise pass over them): the memory floor, what merely moving the "
             "input costs")
JAX_FLOOR_TEXT = ("one jitted fused pass (v > a).astype(int32), reading a and v and writing M "
                  "int32: the least any search through JAX can cost (it needs N == M)")
BANDWIDTH_TEXT = ("effective bandwidth: the bytes of a and v and of M int32 indices over the "
                  "median time. Given only where N <= M: there every cache line of a holds some "
                  "needle's insertion point, so any search must read all of a and v; with N > M "
                  "a search may skip most of a (a binary search reads about M*log2(N) keys), and "
                  "bytes / time would be no bandwidth")
COPY_SHARE_TEXT = ("that bandwidth over the copy floor's (which counts the bytes it reads and "
                   "writes): 100% moves a search's bytes as fast as a plain copy moves its own")
_GROUP_TEXT = {"numpy": "numpy.searchsorted's",
               "jnp": "the fastest jnp.searchsorted method's",
               "torch": "torch.searchsorted's", "cupy": "cupy.searchsorted's"}
_DESCRIPTIONS = {
    HEADLINE: "jaxsearch.searchsorted(a, v), the drop-in call (sorted_v=None: it merges, "
              "checking the needles' order as it goes, and binary-searches a part of them "
              "found out of order)",
    "jaxsearch sorted_v=True": "jaxsearch.searchsorted told that v is sorted (sorted_v=True)",
    "jaxsearch sorted_v=False": "jaxsearch.searchsorted told that v may be unsorted "
                                "(sorted_v=False): a binary search per needle",
    "numpy": "numpy.searchsorted on host copies of a and v",
    "numpy on jax buffers": "numpy.searchsorted reading the jax arrays' own buffers",
    "torch": "torch.searchsorted", "torch (cuda)": "torch.searchsorted on the GPU",
    "cupy": "cupy.searchsorted",
    COPY_NAME: COPY_TEXT, JAX_FLOOR_NAME: JAX_FLOOR_TEXT,
}


def describe(impl: str) -> str:
    """What an impl named in the tables is, for their legends."""
    if impl.startswith("jnp "):
        return f"jnp.searchsorted(a, v, method={impl.removeprefix('jnp ')!r})"
    if impl.startswith("numpy ") and "(Python " in impl:
        return ("numpy.searchsorted in another Python (--numpy-python), in a worker process: "
                "each time holds a round trip over a pipe; answers compared with this numpy's")
    return _DESCRIPTIONS.get(impl, "an implementation of this run")


def fmt_ok(result: Result) -> str:
    return {None: "-", True: "yes", False: "NO"}[result.correct]


def _explained(title: str, table: str, notes: Footnotes, legend: str) -> str:
    """A table with its title above, and its footnotes and legend below."""
    return "\n".join(part for part in (title, table, str(notes), legend) if part)


def main_job_table(results: Sequence[Result]) -> str:
    """One block per problem: each impl's time and its speed-ups, the reasons
    for its empty cells under it; then one legend for all blocks.

    Impls that do not apply to a problem have no row in its block.
    """
    blocks = []
    for problem, rs in group_by_problem(results).items():
        refs = problem_summary(rs)
        notes = Footnotes()
        rows = []
        for r in (r for r in rs if r.applies):
            if r.seconds is None:
                rows.append([r.impl] + [""] * 5 + [f"skipped: {r.skipped}"])
            elif r.group == "floor":
                rows.append([r.impl, fmt_ms(r.seconds)] + [""] * 4
                            + ["a reference, not a search"])
            else:
                rows.append([r.impl, fmt_ms(r.seconds)] + [
                    notes.cell(ratio(refs[g], r), fmt_x,
                               why_untimed(reference_members(rs, g), g)) for g in ("numpy", "jnp")
                ] + [notes.cell(ratio(r, refs["floor"]), fmt_x,
                                why_untimed(reference_members(rs, "floor"), JAX_FLOOR_NAME)),
                     fmt_ok(r), ""])
        best_jnp = refs["jnp"].impl if refs["jnp"] else "none"
        table = format_table(["implementation", "median ms", "speed-up vs numpy", "vs best jnp",
                              "time / jax floor", "correct", "note"], rows, align="lrrrrrl")
        blocks.append(_explained(f"{problem.label}   (best jnp: {best_jnp})", table, notes, ""))
    names = dict.fromkeys(r.impl for r in results if r.applies)
    absent = dict.fromkeys(f"{r.impl} ({(r.skipped or '').removeprefix(NOT_APPLICABLE + ': ')})"
                           for r in results if not r.applies)
    legend = "\n".join([
        "Legend, for every block above:",
        format_legend([
            ("problem", PROBLEM_TEXT), ("implementation", "what the row times (see Rows)"),
            ("median ms", MEDIAN_TEXT),
            ("speed-up vs numpy", f"{_GROUP_TEXT['numpy']} median time / the row's: above 1x, "
                                  "the row is faster"),
            ("vs best jnp", f"{_GROUP_TEXT['jnp']} median time / the row's (the method is named "
                            "above the block)"),
            ("time / jax floor", "the row's median time / the jax floor's: 1x is as fast as any "
                                 "search through JAX can be (below 1x only where fixed per-call "
                                 "costs dominate: small problems)"),
            ("correct", CORRECT_TEXT), ("note", "why a row has no numbers")]),
        "Rows:",
        format_legend([(n, describe(n)) for n in names]),
        *([textwrap.fill("A block has no row for what does not apply to its problem: "
                         + ", ".join(absent) + ".", 100)] if absent else []),
        MARKER_TEXT])
    return "\n\n".join(blocks + [legend])


def short_name(impl: str) -> str:
    """A column-sized name: "jaxsearch sorted_v=True" -> "sorted_v=True", "jnp sort" -> "sort"."""
    return impl if impl == HEADLINE else impl.removeprefix("jaxsearch ").removeprefix("jnp ")


def _vs(group: str) -> str:
    """The header of the speed-up column over a peer group."""
    return f"vs {'best jnp' if group == 'jnp' else group}"


def bench_table(results: Sequence[Result]) -> str:
    """Two tables, one row per problem: every impl's median ms; then the
    headline's speed-ups over each peer group and its effective bandwidth.
    Under each, the reasons for its empty cells and a legend of its columns.
    Every impl that applies to some problem has a column, even one that never
    ran: its cells say why."""
    names = list(dict.fromkeys(r.impl for r in results if r.applies))
    groups = [g for g in PEER_GROUPS if any(r.group == g and r.applies for r in results)]
    time_notes, ratio_notes = Footnotes(), Footnotes()
    times, ratios = [], []
    for problem, rs in group_by_problem(results).items():
        by_name = {r.impl: r for r in rs}
        refs = problem_summary(rs)
        # An impl missing from a problem (a partial saved run) stands as untimed.
        times.append([problem.label] + [
            time_notes.cell(r.seconds, fmt_ms, r.skipped or "not run")
            for r in (by_name.get(n) or Result(problem, n, "") for n in names)])
        head = by_name.get(HEADLINE) or Result(problem, HEADLINE, "jaxsearch")
        bw = bandwidth(head)
        copy_bw = bandwidth(refs["copy"]) if refs["copy"] else None
        share = bw / copy_bw if bw is not None and copy_bw is not None else None
        ratios.append([problem.label] + [
            ratio_notes.cell(ratio(refs[g], head), fmt_x, why_untimed([head], HEADLINE)
                             if head.seconds is None
                             else why_untimed(reference_members(rs, g), g))
            for g in groups] + [
            ratio_notes.cell(bw, fmt_gbps, why_no_bandwidth(head)),
            ratio_notes.cell(share, lambda x: f"{100 * x:.0f}%", why_no_bandwidth(head)
                             if bw is None else why_untimed(reference_members(rs, "copy"),
                                                            COPY_NAME)),
            "yes" if all(r.correct is not False for r in rs) else "NO"])
    time_legend = format_legend(
        [("problem", PROBLEM_TEXT), ("cells", MEDIAN_TEXT)]
        + [(short_name(n), describe(n)) for n in names])
    ratio_legend = format_legend(
        [("problem", PROBLEM_TEXT)]
        + [(_vs(g), f"{_GROUP_TEXT[g]} median time / {HEADLINE}'s: above 1x, {HEADLINE} is "
                    "faster") for g in groups]
        + [("GB/s", f"{HEADLINE}'s {BANDWIDTH_TEXT}"), ("% of copy", COPY_SHARE_TEXT),
           ("copy floor", COPY_TEXT),
           ("all correct", f"every implementation timed on the problem passed: {CORRECT_TEXT}")])
    return "\n\n".join([
        _explained("Median ms per call, by implementation", format_table(
            ["problem"] + [short_name(n) for n in names], times), time_notes,
            f"Legend:\n{time_legend}\n{MARKER_TEXT}"),
        _explained(f"{HEADLINE} (the drop-in call) against the fastest of each peer, and its "
                   "effective bandwidth", format_table(
                       ["problem"] + [_vs(g) for g in groups]
                       + ["GB/s", "% of copy", "all correct"], ratios), ratio_notes,
                   f"Legend:\n{ratio_legend}\n{MARKER_TEXT}")])


JSON_LEGEND = {
    "problem": PROBLEM_TEXT,
    "median_s": "median seconds per call, each call blocked on until its result is ready",
    "skipped": "why the row has no time: not applicable, estimated too slow or too big, "
               "or the error it raised",
    "correct": CORRECT_TEXT + "; null: not checked",
    "speedup_vs": "per peer group, the fastest member's median time / this row's",
    "time_over_jax_floor": "this row's median time / the jax floor's: " + JAX_FLOOR_TEXT,
    "bandwidth_GBps": BANDWIDTH_TEXT + "; null where not given, or without a time",
    "fraction_of_copy_bandwidth": COPY_SHARE_TEXT + "; the copy floor is " + COPY_TEXT,
}



def results_json(results: Sequence[Result], meta: dict[str, Any]) -> dict[str, Any]:
    """Results with their ratios against each peer group, and a legend of the
    fields, ready for json.dump."""
    rows = []
    for rs in group_by_problem(results).values():
        refs = problem_summary(rs)
        for r in rs:
            bw, copy_bw = bandwidth(r), refs["copy"] and bandwidth(refs["copy"])
            rows.append({
                "problem": dataclasses.asdict(r.problem), "impl": r.impl, "group": r.group,
                **timing_json(r.timing), "skipped": r.skipped, "correct": r.correct,
                "speedup_vs": {g: ratio(refs[g], r) for g in PEER_GROUPS},
                "time_over_jax_floor": ratio(r, refs["floor"]),
                "bandwidth_GBps": bw and bw / 1e9,
                "fraction_of_copy_bandwidth": bw / copy_bw if bw and copy_bw else None,
            })
    return {"meta": meta, "legend": JSON_LEGEND, "results": rows}


def results_from_json(data: dict[str, Any]) -> list[Result]:
    """Rebuild results from :func:`results_json`'s output (to re-plot a saved run)."""
    return [Result(Problem(**row["problem"]), row["impl"], row["group"], timing_from_json(row),
                   row["skipped"], row["correct"]) for row in data["results"]]
