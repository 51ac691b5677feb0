"""Draw the documentation's figures into docs/_static/ (matplotlib).

    python docs/figures.py merge-path                  # docs/_static/merge_path.png
    python docs/figures.py speed out/bench_cpu.json    # docs/_static/speed_cpu.png

`speed` reads the JSON that `jaxsearch bench --quick --output out/` writes
and plots the median time per call against N and M. `merge-path` draws the
merge path's tiling of a small example, as the Pallas Triton kernels tile it
(pallas_kernels/pallas_triton/merge_path.py and partition.py).
"""

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STATIC = Path(__file__).resolve().parent / "_static"


def save(fig, out, dpi):
    """Save as a PNG of 128 colours (a third of the size; Pillow comes with
    matplotlib)."""
    from PIL import Image

    fig.savefig(out, dpi=dpi)
    Image.open(out).convert("RGB").quantize(128, dither=Image.Dither.NONE).save(out, optimize=True)


def merge_path(out):
    """The merge of sorted `a` (columns) and sorted `v` (rows), side="left",
    as a staircase from the top left corner: a step right passes a[i] (it
    counts towards the next needle, a[i] < v[j]), a step down answers v[j]
    with the number of keys passed. The diagonals i + j = k * tile cut the
    path into tiles of `tile` steps; where the path crosses diagonal k (the
    partition pass's split i_k) gives tile k its slices a[i_k:i_k+1] and
    v[k * tile - i_k:...]."""
    a = [1, 2, 4, 4, 5, 7, 8, 9, 11, 12]
    v = [0, 3, 4, 6, 6, 10, 13, 14]
    tile = 6
    n, m = len(a), len(v)

    path, answers = [(0, 0)], []
    i = j = 0
    while i < n or j < m:
        if i < n and (j >= m or a[i] < v[j]):
            i += 1
        else:
            answers.append(i)
            j += 1
        path.append((i, j))
    diagonals = list(range(0, n + m, tile)) + [n + m]
    splits = [next(p for p in path if sum(p) == d) for d in diagonals]

    fig, ax = plt.subplots(figsize=(8.6, 6.4))
    colors = ["#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb"]
    for k, ((i0, j0), (i1, j1)) in enumerate(zip(splits, splits[1:])):
        ax.add_patch(plt.Rectangle((i0, j0), i1 - i0, j1 - j0, color=colors[k % len(colors)],
                                   zorder=0))
        ax.text((i0 + i1) / 2, (j0 + j1) / 2, f"tile {k}\na[{i0}:{i1}]\nv[{j0}:{j1}]",
                ha="center", va="center", fontsize=9, zorder=3,
                bbox=dict(boxstyle="round", fc="white", ec="none", alpha=0.8))
    for x in range(n + 1):
        ax.plot([x, x], [0, m], color="0.85", lw=0.8, zorder=1)
    for y in range(m + 1):
        ax.plot([0, n], [y, y], color="0.85", lw=0.8, zorder=1)
    for d in diagonals[1:-1]:
        ax.plot([min(d, n), d - min(d, m)], [d - min(d, n), min(d, m)], color="0.35", ls="--",
                lw=1.2, zorder=2, label=f"diagonals i + j = k * {tile}" if d == tile else None)
    xs, ys = zip(*path)
    ax.plot(xs, ys, color="#08519c", lw=2.5, zorder=4, label="merge path")
    sx, sy = zip(*splits)
    ax.plot(sx, sy, "o", color="#a50f15", ms=8, zorder=5, label="tile boundaries (splits)")

    ax.set_xticks([x + 0.5 for x in range(n)], [f"{x}" for x in a])
    ax.set_yticks([y + 0.5 for y in range(m)],
                  [f"v[{j}] = {x}  ->  {answers[j]}" for j, x in enumerate(v)])
    ax.xaxis.tick_top()
    ax.set_xlabel("a, sorted keys (a step right passes one)")
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("v, sorted needles -> answer\n(a step down answers one)")
    ax.set_xlim(-0.2, n + 0.2)
    ax.set_ylim(m + 0.2, -0.2)
    ax.set_aspect("equal")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=3, fontsize=9, frameon=False)
    ax.set_title(f"The merge path, side='left', N = {n}, M = {m}, tile = {tile}", pad=40)
    fig.tight_layout()
    save(fig, out, 110)


def speed(bench_json, out):
    """Median ms per call against N = M (left) and against N / M at
    max(N, M) = 1e6 (right), float32, from a `jaxsearch bench` JSON."""
    data = json.loads(Path(bench_json).read_text())
    meta = data["meta"]
    times = {}
    for r in data["results"]:
        p = r["problem"]
        if r["median_s"] is not None and p["dtype"] == "float32":
            times[(r["impl"], p["n"], p["m"], p["sorted_v"])] = r["median_s"] * 1e3
    lines = [  # (implementation, needles sorted, label, style)
        ("jaxsearch", True, "jaxsearch, sorted needles", dict(color="C0", marker="o")),
        ("jaxsearch", False, "jaxsearch, unsorted needles", dict(color="C0", marker="o", ls=":")),
        ("jnp scan", True, "jnp.searchsorted (default method)", dict(color="C3", marker="v")),
        ("numpy", True, "numpy.searchsorted, sorted needles", dict(color="0.4", marker="s")),
        ("copy floor", True, "copy floor (a copy of a and v)", dict(color="k", ls="--")),
    ]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
    for impl, sorted_v, label, style in lines:
        pts = sorted((n, t) for (i, n, m, s), t in times.items() if i == impl and s == sorted_v
                     and n == m)
        if pts:
            left.plot(*zip(*pts), label=label, **style)
        pts = sorted((n / m, t) for (i, n, m, s), t in times.items() if i == impl and s
                     and sorted_v and max(n, m) == 10**6)
        if pts:
            right.plot(*zip(*pts), label=label, **style)
    left.set(xscale="log", yscale="log", xlabel="N = M (keys = needles)",
             ylabel="median ms per call (lower is faster)", title="N = M")
    right.set(xscale="log", yscale="log", xlabel="N / M (keys per needle)",
              title="max(N, M) = 1e6, sorted needles")
    for ax in (left, right):
        ax.grid(True, which="major", color="0.9")
    left.legend(fontsize=8)
    fig.suptitle(f"float32, side='left', {meta['cpu_model']} ({meta['cores']} cores), "
                 f"jax {meta['jax']}, jaxsearch {meta['jaxsearch']}: jaxsearch bench --quick")
    fig.tight_layout()
    save(fig, out, 100)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="figure", required=True)
    sub.add_parser("merge-path")
    s = sub.add_parser("speed")
    s.add_argument("bench_json")
    args = parser.parse_args()
    if args.figure == "merge-path":
        merge_path(STATIC / "merge_path.png")
    else:
        speed(args.bench_json, STATIC / "speed_cpu.png")


if __name__ == "__main__":
    main()
