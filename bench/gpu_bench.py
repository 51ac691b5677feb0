"""GPU benchmark of jaxsearch's GPU kernels against jnp, torch and cupy.

Run by bench/gpu_check.sh on a GPU machine once jaxsearch is installed.
Both GPU implementations of the two kernels are timed: Pallas (its Triton
backend) and the native Triton kernels through jax-triton, the latter when
`pallas_kernels.triton_available()` says they can run (triton and jax-triton
installed; carry the jax-triton wheel to a machine without network).
Sorted haystack and sorted needles, N = M = 1e8 by default, int32 and
float32. For each method: the median time, the achieved bandwidth (bytes of
`a` and `v` read plus an int32 output written, per second: the same useful
bytes for every method, so bandwidths compare like times) and the ratio to a
device-to-device copy that moves as many bytes (half of them read, half
written). Every answer is checked against
jnp.searchsorted.

With --estimates FILE (what `python bench/gpu_cost.py --json FILE` wrote on
a machine with the H200 compile wheels), the Pallas Triton kernels of each
estimated row whose N and M are this run's (sorted needles, float32) are
timed at the row's configs ("before", "bisect", "now"), beside the row's
estimate without its sortedness check: the first GPU run checks the model.

  python bench/gpu_bench.py [--n 1e8] [--m 1e8] [--sweep] [--skew] [--estimates FILE]
"""

import argparse
import functools
import json
import statistics
import time

import jax
import jax.numpy as jnp

import jaxsearch.pallas_kernels as pk

try:
    import torch

    if not torch.cuda.is_available():
        torch = None  # A CPU build (Triton's interpreter wants one): no peer.
except ImportError:
    torch = None
try:
    import cupy
except ImportError:
    cupy = None


def median_seconds(fn, sync, *, min_reps=3, max_reps=30, budget_s=1.0):
    """Median wall time of `fn()` after a warm-up call, synchronised."""
    sync(fn())
    times = []
    while len(times) < min_reps or (sum(times) < budget_s and len(times) < max_reps):
        start = time.perf_counter()
        sync(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def jax_sync(out):
    jax.block_until_ready(out)


def torch_sync(_):
    torch.cuda.synchronize()


def cupy_sync(_):
    cupy.cuda.Device().synchronize()


def copy_baseline(nbytes):
    """A device-to-device copy that moves `nbytes` in all, half read and half
    written, as the search's useful bytes count its reads and its writes:
    (seconds, how it was made)."""
    nbytes //= 2
    if torch is not None:
        src = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        return median_seconds(lambda: dst.copy_(src), torch_sync), "torch copy_"
    if cupy is not None:
        src = cupy.ones(nbytes, dtype=cupy.uint8)
        dst = cupy.empty_like(src)
        return median_seconds(lambda: cupy.copyto(dst, src), cupy_sync), "cupy copyto"
    # An elementwise pass reads and writes every byte, like a copy.
    src = jnp.ones(nbytes // 4, jnp.uint32)
    flip = jax.jit(lambda x: x ^ 1)
    return median_seconds(lambda: flip(src), jax_sync), "jax x ^ 1"


def sorted_inputs(n, m, dtype, seed=0):
    ka, kv = jax.random.split(jax.random.key(seed))
    if jnp.issubdtype(dtype, jnp.integer):
        def draw(k, s):
            return jax.random.randint(k, (s,), 0, 2**30, dtype)
    else:
        def draw(k, s):
            return jax.random.normal(k, (s,), dtype)
    return jax.block_until_ready((jnp.sort(draw(ka, n)), jnp.sort(draw(kv, m))))


# Set by --interpret: our kernels in the Pallas interpreter (and the native
# Triton ones in Triton's, given TRITON_INTERPRET=1), to smoke-test this
# script on a machine without a GPU.
INTERPRET = False
# Whether the native Triton kernels can run, and why not; set in main().
TRITON = (False, "not checked yet")


def ours(fn, **kwargs):
    return functools.partial(fn, side="left", out_dtype=jnp.int32, interpret=INTERPRET, **kwargs)


def implementations():
    """GPU implementation -> (merge-path wrapper, binary-search wrapper), for
    each backend that can run here."""
    return {name: (backend.kernel(pk.MERGE_PATH), backend.kernel(pk.BINARY_SEARCH))
            for name, backend in pk.BACKENDS.items() if backend.status(interpret=INTERPRET)[0]}


def methods(a, v):
    """name -> (fn returning the answers, sync); jitted once, here."""
    jitted = {}
    for impl, (merge, binary_search) in implementations().items():
        jitted[f"jaxsearch {impl} merge_path"] = ours(merge)
        jitted[f"jaxsearch {impl} binary_search"] = ours(binary_search)
    for name in ("scan", "scan_unrolled", "sort"):
        jitted[f"jnp {name}"] = functools.partial(jnp.searchsorted, side="left", method=name)
    found = {name: (functools.partial(jax.jit(fn), a, v), jax_sync) for name, fn in jitted.items()}
    if torch is not None:
        a_t, v_t = torch.from_dlpack(a), torch.from_dlpack(v)
        found["torch.searchsorted"] = (
            lambda: torch.searchsorted(a_t, v_t, out_int32=True),
            torch_sync,
        )
    if cupy is not None:
        a_c, v_c = cupy.from_dlpack(a), cupy.from_dlpack(v)
        found["cupy.searchsorted"] = (lambda: cupy.searchsorted(a_c, v_c), cupy_sync)
    return found


def as_jax(out):
    if torch is not None and isinstance(out, torch.Tensor):
        return jnp.from_dlpack(out.to(torch.int32))
    if cupy is not None and isinstance(out, cupy.ndarray):
        return jnp.from_dlpack(out.astype(cupy.int32))
    return out


def report(rows, copy_s, nbytes, baseline):
    print(f"  {'method':32s} {'ms':>9s} {'GB/s':>8s} {'copy/t':>7s} {'vs ' + baseline:>14s}  ok")
    base_s = dict((name, s) for name, s, _ in rows).get(baseline)
    for name, seconds, ok in rows:
        speedup = f"{base_s / seconds:13.1f}x" if base_s else f"{'-':>14s}"
        print(
            f"  {name:32s} {seconds * 1e3:9.3f} {nbytes / seconds / 1e9:8.1f} "
            f"{copy_s / seconds:7.3f} {speedup}  {'yes' if ok else 'NO'}"
        )


def run_case(n, m, dtype, copy_s):
    a, v = sorted_inputs(n, m, dtype)
    nbytes = (n + m) * a.dtype.itemsize + m * 4
    want = jax.block_until_ready(
        jnp.searchsorted(a, v, side="left", method="sort").astype(jnp.int32)
    )
    rows = []
    for name, (fn, sync) in methods(a, v).items():
        try:
            seconds = median_seconds(fn, sync)
            ok = bool(jnp.array_equal(as_jax(fn()).astype(jnp.int32), want))
        except Exception as err:  # One failing peer must not stop the rest.
            print(f"  {name}: failed: {type(err).__name__}: {err}")
            continue
        rows.append((name, seconds, ok))
    sorted_s = median_seconds(functools.partial(pk.is_sorted, v), jax_sync)
    rows.append(("jaxsearch is_sorted(v) only", sorted_s, bool(pk.is_sorted(v))))
    print(f"\nN={n:.0e} M={m:.0e} {jnp.dtype(dtype).name}: {nbytes / 1e9:.2f} GB of useful traffic")
    report(rows, copy_s, nbytes, "jnp scan")
    del a, v, want


def sweep(n, m, dtype, copy_s):
    """Times every tuning-space config: data for the autotuner's defaults."""
    a, v = sorted_inputs(n, m, dtype, seed=1)
    nbytes = (n + m) * a.dtype.itemsize + m * 4
    rows = []
    for impl, (merge, binary_search) in implementations().items():
        for config in pk.tuning_space():
            fn = merge if config.kind == "merge_path" else binary_search
            call = functools.partial(jax.jit(ours(fn, config=config)), a, v)
            try:
                seconds = median_seconds(call, jax_sync, max_reps=10, budget_s=0.3)
            except Exception as err:  # noqa: BLE001  (one failure must not stop all)
                print(f"  {impl} {config}: failed: {type(err).__name__}: {err}")
                continue
            rows.append((seconds, impl, config))
    print(f"\nTuning space, N={n:.0e} M={m:.0e} {jnp.dtype(dtype).name}:")
    for seconds, impl, config in sorted(rows, key=lambda r: r[0]):
        print(
            f"  {seconds * 1e3:9.3f} ms {nbytes / seconds / 1e9:8.1f} GB/s "
            f"copy/t {copy_s / seconds:6.3f}  {impl:6s} {config}"
        )


def against_estimates(n, m, rows, copy_s):
    """Times the Pallas Triton kernel of each estimated row for sorted
    float32 needles at this N and M, at the row's configs, beside the
    estimate (the checked call's sortedness test left out: the kernel is
    timed alone)."""
    rows = [r for r in rows if (r.get("n"), r.get("m"), r.get("sorted_v")) == (n, m, True)
            and "estimate ms" in r]
    if not rows:
        print(f"\nno estimate for sorted N={n:.0e} M={m:.0e} in the estimates file")
        return
    a, v = sorted_inputs(n, m, jnp.float32, seed=2)
    want = jnp.searchsorted(a, v, side="left", method="sort").astype(jnp.int32)
    backend = pk.BACKENDS["pallas"]
    print(f"\nMeasured against bench/gpu_cost.py's estimate, N={n:.0e} M={m:.0e} float32:")
    print(f"  {'when':8s} {'measured ms':>12s} {'estimate ms':>12s} {'measured/est':>13s} "
          f"{'copy/t':>7s}  ok  config")
    for row in rows:
        merges = "merge_path" in row["kernel"] or "checked" in row["kernel"]
        kind = pk.MERGE_PATH if merges else pk.BINARY_SEARCH
        config = kind.config_cls(**row["configs"][kind.name])
        call = functools.partial(jax.jit(ours(backend.kernel(kind), config=config)), a, v)
        try:
            seconds = median_seconds(call, jax_sync)
            ok = bool(jnp.array_equal(call(), want))
        except Exception as err:  # noqa: BLE001  (one failure must not stop all)
            print(f"  {row['when']:8s} failed: {type(err).__name__}: {err}")
            continue
        estimate_s = (row["estimate ms"] - row["check ms"]) / 1e3
        print(f"  {row['when']:8s} {seconds * 1e3:12.3f} {estimate_s * 1e3:12.3f} "
              f"{seconds / estimate_s:13.2f} {copy_s / seconds:7.3f}  "
              f"{'yes' if ok else 'NO ':3s} {config}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e8)
    parser.add_argument("--m", type=float, default=1e8)
    parser.add_argument(
        "--sweep", action="store_true", help="also time every tuning-space config (float32)"
    )
    parser.add_argument("--skew", action="store_true", help="also N >> M and M >> N (int32)")
    parser.add_argument("--estimates", metavar="FILE",
                        help="bench/gpu_cost.py's --json output: time its rows' kernels "
                             "beside their estimates")
    parser.add_argument(
        "--interpret",
        action="store_true",
        help="our kernels in the Pallas interpreter, and the "
        "native Triton ones in Triton's given TRITON_INTERPRET=1"
        " (no GPU)",
    )
    args = parser.parse_args()
    global INTERPRET, TRITON
    INTERPRET = args.interpret
    TRITON = pk.BACKENDS["triton"].status(interpret=INTERPRET)
    n, m = int(args.n), int(args.m)
    print(
        f"jax {jax.__version__} on {jax.devices()[0].device_kind}; "
        f"torch {getattr(torch, '__version__', 'absent or without CUDA')}; "
        f"cupy {getattr(cupy, '__version__', 'absent')}"
    )
    print(f"native Triton kernels: {'timed' if TRITON[0] else 'skipped'} ({TRITON[1]})")
    print(
        f"default configs: {pk.default_merge_path_config(n, m, jnp.float32)}"
        f", {pk.default_binary_search_config(n, m, jnp.float32)}"
    )
    nbytes = (n + m) * 4 + m * 4
    copy_s, how = copy_baseline(nbytes)
    print(
        f"device-to-device copy ({how}) moving {nbytes / 1e9:.2f} GB (read and "
        f"written): {copy_s * 1e3:.3f} ms, {nbytes / copy_s / 1e9:.0f} GB/s; "
        f"copy/t below is the fraction of copy speed"
    )
    for dtype in (jnp.int32, jnp.float32):
        run_case(n, m, dtype, copy_s)
    if args.skew:
        for skew_n, skew_m in ((n, max(m // 10_000, 1)), (max(n // 10_000, 1), m)):
            skew_bytes = (skew_n + skew_m) * 4 + skew_m * 4
            run_case(skew_n, skew_m, jnp.int32, copy_s * skew_bytes / nbytes)
    if args.estimates:
        with open(args.estimates) as f:
            against_estimates(n, m, json.load(f), copy_s)
    if args.sweep:
        sweep(n, m, jnp.float32, copy_s)


if __name__ == "__main__":
    main()
