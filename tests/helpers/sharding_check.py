"""jaxsearch.searchsorted against jnp.searchsorted on the same sharded programs:
answers, output shardings and the collectives in the compiled HLO.

It needs 8 devices, so it runs as a process of its own (the device count is
fixed when JAX starts); tests/core/test_sharded.py runs it that way, with small
sizes. By hand, for the table in docs/sharding.md:

    XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu \\
        python tests/helpers/sharding_check.py --n 80000 --m 65536 --table

Every case calls the plain drop-in `jaxsearch.searchsorted(a, v, side,
sorted_v=...)` under `jax.jit` on a 2 x 4 mesh ("x", "y"), in auto sharding
mode and, where jax has it, explicit sharding mode (`jax.set_mesh`), for
both sides, with sorted needles (sorted_v=True and None) and unsorted ones
(None and False). The keys hold ties across the pieces of a split `a`, -0.0
beside 0.0 and a NaN tail; the needles hold NaN, +-inf and -0.0. It raises on
an answer that differs from the unsharded jnp.searchsorted or an output split
otherwise than expected, and prints one JSON line: per case, the collectives
in the compiled HLO of jaxsearch and of jnp (how many instructions of each
kind, and how many of those sit in a loop body, where they run once per
iteration) or the error jnp raised.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import re
import sys

COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute",
               "reduce-scatter")


def collectives(hlo: str) -> dict[str, int]:
    """{op: how many} for the collective instructions in an HLO module's text
    (an asynchronous pair, op-start and op-done, counts once)."""
    counts = {}
    for op in COLLECTIVES:
        found = len(re.findall(rf"= [^=]*? {op}(?:-start)?\(", hlo))
        if found:
            counts[op] = found
    return counts


def looped_collectives(hlo: str) -> dict[str, int]:
    """The same counts for the collectives inside while loops' bodies (and
    whatever those call): each runs once per iteration."""
    computations: dict[str, list[str]] = {}
    name = None
    for line in hlo.splitlines():
        header = re.match(r"(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if header and not line.startswith(" "):
            name = header.group(1)
            computations[name] = []
        elif name is not None and line.startswith(" "):
            computations[name].append(line)
    todo = [b for lines in computations.values() for line in lines
            for b in re.findall(r"body=%?([\w.\-]+)", line)]
    seen: set[str] = set()
    while todo:
        comp = todo.pop()
        if comp in seen or comp not in computations:
            continue
        seen.add(comp)
        for line in computations[comp]:
            todo.extend(re.findall(r"(?:calls|body|condition|to_apply|branch_computations)="
                                   r"\{?%?([\w.\-]+)", line))
    return collectives("\n".join(line for comp in seen for line in computations[comp]))


def describe(report: dict) -> str:
    """'all-reduce 1 (1 in a loop)' and the like; 'none'; or jnp's error."""
    if "error" in report:
        return f"error ({report['error']})"
    counts, looped = report["collectives"], report["in_loops"]
    if not counts:
        return "none"
    return ", ".join(f"{op} {k}" + (f" ({looped[op]} in a loop)" if looped.get(op) else "")
                     for op, k in counts.items())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8000, help="len(a); a multiple of 8")
    parser.add_argument("--m", type=int, default=4096, help="needles; a multiple of 64")
    parser.add_argument("--table", action="store_true", help="also print a Markdown table")
    parser.add_argument("--only", default="", help="only the cases whose name holds this")
    args = parser.parse_args(argv)

    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    if jax.device_count() != 8:
        sys.exit(f"needs 8 devices, found {jax.device_count()}: set XLA_FLAGS="
                 "--xla_force_host_platform_device_count=8")
    n, m = args.n, args.m
    rng = np.random.default_rng(0)
    # Sorted keys with many ties (across the pieces of a split `a` too), -0.0
    # beside 0.0, and a NaN tail in the last piece; or one over two pieces.
    keys = np.round(rng.standard_normal(n) * 8) / 4
    keys[rng.random(n) < 0.1] = 0.0
    a_short = np.sort(keys).astype(np.float32)
    a_short[np.flatnonzero(a_short == 0)[::2]] = -0.0
    a_short[-(n // 100):] = np.nan
    a_long = a_short.copy()
    a_long[-(n // 4):] = np.nan
    a_int = np.sort(rng.integers(-50, 50, n)).astype(np.int32)
    v_any = np.concatenate([
        rng.choice(a_short, m // 2),                       # exact hits, ties, NaN
        rng.standard_normal(m // 2 - 4) * 3,
        [-np.inf, np.inf, -0.0, np.nan]]).astype(np.float32)
    rng.shuffle(v_any)
    v_sorted = np.sort(v_any)
    # Keys for the last sizes: not a multiple of 8, so XLA pads the pieces;
    # sorted, NaN tail last, as sorted_v=True promises.
    a_odd = np.concatenate([np.sort(np.concatenate([a_short[:-(n // 100)],
                                                    rng.standard_normal(3)])),
                            a_short[-(n // 100):]]).astype(np.float32)

    def rows(x, k):  # k sorted rows from x
        return np.sort(x[:len(x) // k * k].reshape(k, -1), axis=1)

    xy = ("x", "y")
    # name: (a, v's shape, a's spec, v's spec, vmap's in_axes, the output's spec)
    cases = {
        "v split, a whole": (a_short, None, P(), P(xy), None, P(xy)),
        "v 2-D split on dim 0": (a_short, (8, -1), P(), P(xy, None), None, P(xy, None)),
        "v 2-D split on dim 1": (a_short, (8, -1), P(), P(None, xy), None, P(None, xy)),
        "v 3-D split on dims 0 and 2": (a_short, (2, 4, -1), P(), P("x", None, "y"), None,
                                        P("x", None, "y")),
        "a split, v whole": (a_short, None, P(xy), P(), None, P()),
        "a split, NaN tail over two pieces": (a_long, None, P(xy), P(), None, P()),
        "a split, int32 keys": (a_int, None, P(xy), P(), None, P()),
        "a split on x, v on y": (a_short, None, P("x"), P("y"), None, P("y")),
        "a split on y, v 2-D on x": (a_short, (8, -1), P("y"), P("x", None), None,
                                     P("x", None)),
        "a and v split on the same axis": (a_short, None, P("x"), P("x"), None, P("x")),
        "vmap: a and v batched, batch split": (rows(a_short, 8), (8, -1), P(xy, None),
                                               P(xy, None), (0, 0), P(xy, None)),
        "vmap: a shared, v's batch split": (a_short, (8, -1), P(), P(xy, None), (None, 0),
                                            P(xy, None)),
        "vmap: batch on y, a's keys on x": (rows(a_long, 4), (4, -1), P("y", "x"),
                                            P("y", None), (0, 0), P("y", None)),
        # Split inside the program (with_sharding_constraint): a's length is
        # no multiple of 8; the output's split is XLA's choice.
        "a split unevenly (n % 8 != 0)": (a_odd, None, P(xy), P(), None, None),
        "a split unevenly on x, v on y": (a_odd, None, P("x"), P("y"), None, None),
    }
    modes = ["auto"]
    if hasattr(jax.sharding, "AxisType") and hasattr(jax, "set_mesh"):
        modes.append("explicit")
    report = {}
    for name, case in cases.items():
        if args.only not in name:
            continue
        for mode in modes:
            if mode == "explicit" and case[-1] is None:
                continue  # uneven splits: explicit mode refuses them
            key = name if mode == "auto" else f"{name} [explicit]"
            report[key] = run_case(name, mode, *case, v_sorted=v_sorted, v_any=v_any)
    print(json.dumps(report))
    if args.table:
        print(f"\n{len(jax.devices())} devices, jax {jax.__version__}, n={n}, m={m}\n")
        print("| case | jaxsearch | jnp |\n|---|---|---|")
        for key, r in report.items():
            print(f"| {key} | {describe(r['jaxsearch'])} | {describe(r['jnp'])} |")
    return 0


def run_case(name, mode, a_np, v_shape, a_spec, v_spec, in_axes, out_spec, *, v_sorted,
             v_any):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import AxisType, Mesh, NamedSharding

    import jaxsearch

    devices = np.array(jax.devices()).reshape(2, 4)
    if mode == "explicit":
        mesh = Mesh(devices, ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
        context = functools.partial(jax.set_mesh, mesh)  # which sets it at once
    else:  # Mesh's default, unlike jax.make_mesh's (Explicit since jax 0.8)
        mesh, context = Mesh(devices, ("x", "y")), contextlib.nullcontext
    uneven = out_spec is None
    if np.issubdtype(a_np.dtype, np.integer):
        v_any = np.round(np.nan_to_num(v_any, posinf=99, neginf=-99) * 10).astype(a_np.dtype)
        v_sorted = np.sort(v_any)
    variants = [("left", v_sorted, True), ("right", v_sorted, True), ("left", v_sorted, None),
                ("right", v_any, None), ("left", v_any, False)]
    # jnp's answers on one device, outside the mesh context.
    wants = {(side, sorted_v): _unsharded(jax, jnp, a_np, v_np if v_shape is None
                                          else v_np.reshape(v_shape), side, in_axes)
             for side, v_np, sorted_v in variants}
    reports = {}
    with context():
        for side, v_np, sorted_v in variants:
            where = f"{name} [{mode}] side={side} sorted_v={sorted_v}"
            print(f"... {where}", file=sys.stderr, flush=True)
            v_np = v_np if v_shape is None else v_np.reshape(v_shape)

            def program(search, side=side, sorted_v=sorted_v):
                def one(a, v):
                    if search is jnp.searchsorted:
                        return jnp.searchsorted(a, v, side=side)
                    return search(a, v, side, sorted_v=sorted_v)

                fn = one if in_axes is None else jax.vmap(one, in_axes=in_axes)
                if not uneven:
                    return jax.jit(fn)

                def constrained(a, v):
                    return fn(jax.lax.with_sharding_constraint(a, NamedSharding(mesh, a_spec)),
                              jax.lax.with_sharding_constraint(v, NamedSharding(mesh, v_spec)))
                return jax.jit(constrained)

            if uneven:
                a_in, v_in = a_np, v_np
            else:
                a_in = jax.device_put(a_np, NamedSharding(mesh, a_spec))
                v_in = jax.device_put(v_np, NamedSharding(mesh, v_spec))
            compiled = program(jaxsearch.searchsorted).lower(a_in, v_in).compile()
            got = compiled(a_in, v_in)
            want = wants[side, sorted_v]
            assert got.dtype == want.dtype, (where, got.dtype, want.dtype)
            np.testing.assert_array_equal(np.asarray(got), want, err_msg=where)
            if out_spec is not None:
                spec = tuple(got.sharding.spec) + (None,) * (got.ndim - len(got.sharding.spec))
                expected = tuple(out_spec) + (None,) * (got.ndim - len(out_spec))
                assert spec == expected, (where, got.sharding.spec, out_spec)
            text = compiled.as_text()
            report = {"collectives": collectives(text), "in_loops": looped_collectives(text)}
            first = reports.setdefault("jaxsearch", report)
            assert report == first, (where, report, first)  # the same for every variant
        try:
            text = program(jnp.searchsorted).lower(a_in, v_in).compile().as_text()
            reports["jnp"] = {"collectives": collectives(text),
                              "in_loops": looped_collectives(text)}
        except Exception as exc:  # jnp refuses some explicit shardings
            reports["jnp"] = {"error": f"{type(exc).__name__}: "
                                       f"{str(exc).splitlines()[0][:100]}"}
    return reports


def _unsharded(jax, jnp, a, v, side, in_axes):
    """jnp's answer on one device, from host arrays."""
    import numpy as np

    def one(a, v):
        return jnp.searchsorted(a, v, side=side)

    fn = one if in_axes is None else jax.vmap(one, in_axes=in_axes)
    device = jax.devices()[0]
    return np.asarray(jax.jit(fn)(jax.device_put(a, device), jax.device_put(v, device)))


if __name__ == "__main__":
    sys.exit(main())
