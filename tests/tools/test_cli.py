"""The command lines, run as a user runs them (subprocesses; no timing asserts)."""

import argparse
import dataclasses
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import jax
import pytest
from helpers.caches import write
from helpers.processes import run_python
from helpers.tiers import full

import jaxsearch
from jaxsearch import tuning
from jaxsearch.core import cpu, gpu
from jaxsearch.core.implementations import GPU_IMPLEMENTATIONS
from jaxsearch.pallas_kernels import KERNEL_KINDS, BinarySearchConfig, MergePathConfig
from jaxsearch.tools.bench import searchsorted as bench_searchsorted
from jaxsearch.tools.bench.format import fmt_count
from jaxsearch.tools.cli import autotune, info, main
from jaxsearch.tools.cli.args import parse_count, parse_counts, parse_dtypes, parse_ratios
from jaxsearch.tools.cli.info import info_report
from jaxsearch.tuning import CacheEntry

ROOT = Path(__file__).resolve().parents[2]


def run(*args, tmp_path, timeout=180):
    return run_python(*args, env={tuning.TUNING_DIR_ENV: str(tmp_path / "cache")},
                      cwd=tmp_path, timeout=timeout)


def test_main_job(tmp_path):
    done = run("-m", "jaxsearch", "--scale", "1e-4", "--repeats", "1", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "N=1e3 M=1e3 float32 sorted" in done.stdout  # 1e7 scaled by 1e-4
    for header in ("median ms", "speed-up vs numpy", "vs best jnp", "time / jax floor",
                   "correct", "jaxsearch sorted_v=True", "jnp compare_all", "copy floor"):
        assert header in done.stdout, header
    assert done.stdout.count("(best jnp:") == 5 and "NO" not in done.stdout
    # Explained: a legend under the blocks, and why the skewed ones have no jax floor.
    assert "Legend, for every block above:" in done.stdout
    assert done.stdout.count("[1] jax floor: not applicable: needs N == M") == 2
    assert "jaxsearch [" in done.stderr  # the progress bar


def test_info(tmp_path, monkeypatch):
    done = run("-m", "jaxsearch", "info", "--n", "1e7", "--m", "1e3", "--dtype", "int64",
               tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for text in ("platform:", "cython", "pallas", "xla", "bisect_ratio", "CPU threads:",
                 "N=1e7, M=1e3, int64", str(tmp_path / "cache" / "cpu" / "searchsorted.json"),
                 str(tuning.cache_file(tuning.SHIPPED_DIR, "cpu"))):
        assert text in out, text
    # No user cache here: the shipped cache answers if it covers int64, else the defaults.
    monkeypatch.setenv(tuning.TUNING_DIR_ENV, str(tmp_path / "cache"))
    assert f"from {tuning.resolve_cpu_config(10**7, 10**3, 'int64')[1]}\n" in out
    assert not re.search(r"\d\.\d{6}", out)  # no float reprs


def test_info_report_says_what_each_config_field_means():
    config = tuning.CpuConfig(bisect_ratio=5.656854249492381, runs_ratio=724.0773439350247,
                               threads=0, min_parallel=31623)
    with tuning.use_cpu_config(config):
        out = info_report(10**7, 10**3, "float32")
    assert not re.search(r"\d\.\d{6}", out) and "CpuConfig(" not in out
    assert "  CPU config:    from use_cpu_config\n" in out
    lines = [line.split(None, 2) for line in out.splitlines()]
    fields = {line[0]: line[1:] for line in lines if len(line) == 3}
    assert fields["bisect_ratio"] == ["5.66", "lock-step binary search (bisect) of sorted "
                                      "needles when N/M > 5.66"]
    assert fields["runs_ratio"][0] == "724" and "M/N > 724" in fields["runs_ratio"][1]
    assert fields["threads"] == ["0", f"all available cores ({cpu.available_cores()} here)"]
    assert fields["min_parallel"][0] == "31623"
    with tuning.use_cpu_config(tuning.CpuConfig(threads=3)):
        assert "at most 3 threads per call" in info_report(10**7, 10**3, "float32")


# A GPU that is not here, as the tuning caches name its kind.
FAKE_GPU = "nvidia_h200"


def gpu_tiles(implementation):
    """Each kernel kind's tuned config for one implementation: tiles and
    blocks of its own, so that a report shows whose they are."""
    i = GPU_IMPLEMENTATIONS.index(implementation)
    return {"merge_path": MergePathConfig(tile=256 << i, num_warps=8),
            "binary_search": BinarySearchConfig(block=128 << i, num_warps=8)}


@pytest.mark.parametrize("implementation", GPU_IMPLEMENTATIONS)
def test_info_reports_the_tiles_of_the_gpu_implementation_that_runs(caches, monkeypatch,
                                                                     implementation):
    """On a GPU whose cache tunes every implementation (and prefers another
    one, which cannot run there), `info` names the implementation that runs
    and the tuned choice, and shows the tiles of the one that runs, not
    Pallas Triton's whatever ran."""
    user, _ = caches
    tuned = GPU_IMPLEMENTATIONS[(GPU_IMPLEMENTATIONS.index(implementation) + 1)
                                % len(GPU_IMPLEMENTATIONS)]
    bucket = {"n": 10**6, "m": 10**6}
    entries = [CacheEntry(tuning.gpu_kernel_key(name, kind.name), "float32", bucket,
                          dataclasses.asdict(gpu_tiles(name)[kind.name]))
               for name in GPU_IMPLEMENTATIONS for kind in KERNEL_KINDS]
    entries.append(CacheEntry(tuning.IMPLEMENTATION_KERNEL, "float32", bucket, {"name": tuned}))
    path = write(user, *entries, kind=FAKE_GPU)
    monkeypatch.setattr(tuning, "device_kind", lambda platform=None: FAKE_GPU)
    monkeypatch.setattr(info.api, "default_implementation", lambda n, m, dtype: implementation)
    out = info_report(10**6, 10**6, "float32")
    assert f"  GPU implementation: {implementation} (tuned: {tuned}, from {path})\n" in out
    merge, binary = (gpu_tiles(implementation)[kind.name] for kind in KERNEL_KINDS)
    assert (f"  GPU merge_path: chunk=None, items=None, method=bisect, num_stages=1, "
            f"num_warps=8, partition=once, "
            f"tile={merge.tile}\n                 from {path}\n") in out
    assert (f"  GPU binary_search: block={binary.block}, num_stages=1, num_warps=8\n"
            f"                 from {path}") in out
    for other in GPU_IMPLEMENTATIONS:
        if other != implementation:
            assert f"tile={gpu_tiles(other)['merge_path'].tile}\n" not in out, other
            assert f"block={gpu_tiles(other)['binary_search'].block}," not in out, other


@full  # a benchmark run, not the library's contract (tests/conftest.py)
def test_bench_cli_writes_files(tmp_path):
    pytest.importorskip("matplotlib")
    done = run("-m", "jaxsearch", "bench", "--quick", "--sizes", "1e2", "--dtypes", "float32",
               "--skew-size", "100", "--skew-ratios", "10", "--repeats", "1", "--output", "out",
               tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    kind = tuning.device_kind()
    for suffix in ("json", "png"):
        assert (tmp_path / "out" / f"bench_{kind}.{suffix}").exists()
    assert "wrote png" in done.stdout and "bench [" in done.stderr


@full  # a benchmark run, not the library's contract (tests/conftest.py)
def test_cpu_targets_script_prints_its_table(tmp_path):
    done = run(str(ROOT / "bench" / "cpu_targets.py"), "--scale", "1e-4", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr  # no --check: misses at toy sizes are expected
    for text in ("Target 2 grid", "numpy on jax buffers", "jitted call / jitted no-op", "status",
                 " of 12 met"):
        assert text in done.stdout, text


@pytest.mark.parametrize("command, usage", [
    (("-m", "jaxsearch"), "python -m jaxsearch [-h] [--version]"),
    (("-m", "jaxsearch", "bench"), "python -m jaxsearch bench [-h]"),
    (("-m", "jaxsearch", "autotune"), "python -m jaxsearch autotune [-h]"),
    (("-m", "jaxsearch.autotune"), "python -m jaxsearch.autotune [-h]")])
def test_the_package_commands_name_themselves(tmp_path, command, usage):
    """Under ``python -m``, usage lines name the module run. (bench/bench.py
    and bench/autotune.py, their aliases, are gone.)"""
    done = run(*command, "--help", tmp_path=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith(f"usage: {usage}"), done.stdout


# The console scripts pyproject.toml installs, beside the interpreter running the tests.
SCRIPTS = Path(sys.executable).parent


@pytest.mark.parametrize("script, args", [("jaxsearch", ()), ("jaxsearch", ("info",)),
                                          ("jaxsearch-autotune", ())])
def test_the_console_scripts_name_themselves(tmp_path, script, args):
    if not (SCRIPTS / script).exists():
        pytest.skip(f"no {script} script beside {sys.executable}")
    done = subprocess.run([str(SCRIPTS / script), *args, "--help"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {' '.join([script, *args])} [-h]"), done.stdout


@pytest.mark.parametrize("argv0, prog", [("/opt/venv/bin/jaxsearch", "jaxsearch"),
                                         ("/usr/local/bin/js", "js")])
def test_usage_names_the_script_as_run(monkeypatch, capsys, argv0, prog):
    monkeypatch.setattr(sys, "argv", [argv0, "--help"])
    with pytest.raises(SystemExit) as exit_:
        main.main()
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {prog} [-h] [--version]")


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"jaxsearch {jaxsearch.__version__}\n"


def test_a_bare_command_runs_the_main_job_and_its_help_says_so(monkeypatch):
    parser = main.build_parser()
    assert parser.parse_args([]).command is None
    assert "Without a command, runs the main job" in parser.format_help()
    assert "the main job (no command):" in parser.format_help()
    ran = []
    monkeypatch.setattr(main.bench, "run_main_job", lambda args: ran.append(args) or 0)
    assert main.main(["--scale", "0.5"]) == 0 and ran[0].scale == 0.5


def options(parser):
    """The options of `parser`, by their longest name (no -h)."""
    return {max(a.option_strings, key=len): a for a in parser._actions
            if a.option_strings and not isinstance(a, argparse._HelpAction)}


def commands(parser):
    """`parser`'s subcommands' parsers, by name."""
    return {name: sub for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def test_autotune_is_a_command_and_its_alias_takes_the_same_options(monkeypatch):
    command = commands(main.build_parser())["autotune"]
    alias = autotune.build_parser()
    assert options(command).keys() == options(alias).keys()
    assert {"--quick", "--dtypes", "--sizes", "--output", "--platforms", "--repeats",
            "--no-threads"} <= options(command).keys()
    assert command.format_help().split("options:")[1] == alias.format_help().split("options:")[1]
    # Both run the same arguments through the same runner.
    ran = []
    monkeypatch.setattr(autotune, "run_autotune", lambda args: ran.append(args) or 0)
    monkeypatch.setattr(main.autotune, "run_autotune", autotune.run_autotune)
    argv = ["--quick", "--dtypes", "int32", "--repeats", "2", "--no-threads"]
    assert autotune.main(argv) == 0 and main.main(["autotune", *argv]) == 0
    through_alias, through_command = (vars(a) for a in ran)
    assert through_command.pop("command") == "autotune"
    for args in (through_alias, through_command):
        args.pop("invocation")
        args.pop("scale", None), args.pop("repeats", None)  # the main job's, on the top level
    assert through_alias == through_command
    assert through_alias["tune_repeats"] == 2 and through_alias["threads"] is False


def all_parsers():
    """Each command line's parsers: the top level, its commands and the alias."""
    top = main.build_parser()
    return {"jaxsearch": top, **commands(top), "jaxsearch-autotune": autotune.build_parser()}


@pytest.mark.parametrize("name", ["jaxsearch", "bench", "info", "autotune",
                                  "jaxsearch-autotune"])
def test_every_command_and_option_is_described_and_shows_its_default(name):
    parser = all_parsers()[name]
    assert parser.description, name
    formatter = parser._get_formatter()
    for flag, action in options(parser).items():
        text = formatter._expand_help(action) if action.help else ""
        assert len(text) > 10, (name, flag)
        if action.nargs != 0:  # takes a value: the help says what one not given means
            assert re.search(r"\(default: [^)]+\)", text), (name, flag, text)
    if name == "jaxsearch":
        helps = {a.dest: a.help for a in parser._actions
                 if isinstance(a, argparse._SubParsersAction) for a in a._choices_actions}
        assert helps.keys() == {"bench", "info", "autotune"} and all(helps.values())


def test_defaults_shown_are_the_ones_used():
    """Shown from the grids the commands run, so that the two cannot disagree."""
    bench, tune = options(all_parsers()["bench"]), options(all_parsers()["autotune"])
    grids = bench_searchsorted.GRIDS
    full, quick = (",".join(map(fmt_count, g.sizes)) for g in (grids.full, grids.quick))
    assert f"(default: {full}; with --quick: {quick})" in bench["--sizes"].help
    assert bench["--repeats"].metavar == "N"  # not BENCH_REPEATS, its dest
    assert f"(default: {autotune.GRIDS.full.repeats})" in tune["--repeats"].help


def pyproject_extras():
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
               ["optional-dependencies"])


def test_info_install_hint_names_only_extras_the_package_has(monkeypatch):
    hint = info.install_hint()
    named = re.findall(r"\[([\w.-]+)\]", hint)
    assert named and set(named) <= pyproject_extras() & set(info.extras()), hint
    assert "jax-triton" not in hint and "cuda1" not in hint  # no pinned versions retyped
    # An extra the installed package does not provide is never named.
    monkeypatch.setattr(info.importlib.metadata, "requires",
                        lambda dist: ['jax-triton==9; extra == "cuda13"'])
    assert "[" not in info.install_hint() and "pyproject.toml" in info.install_hint()


def test_info_gives_one_install_hint_and_says_what_it_checked():
    out = info_report(10**7, 10**7, "float32")
    lines = out.splitlines()
    impl = {line.split()[0]: line for line in lines[lines.index("implementations:") + 1:]
            if line.startswith("  ") and len(line.split()) > 1}
    assert [line for line in lines if "pip install" in line] == \
        ([impl["install"]] if "install" in impl else [])
    for name in GPU_IMPLEMENTATIONS:
        state = impl[name].split(None, 1)[1]
        reasons = re.split(r"; for a GPU: |unavailable(?: here and for a GPU)?: ", state)
        assert len([r for r in reasons if r]) == len({r for r in reasons if r}), state
        assert "works" not in state, state
        if jax.default_backend() == "cpu" and gpu.status(name)[0]:  # what was checked
            assert state.endswith("import (not compiled or run: no GPU here)"), state


def test_info_says_what_the_default_call_checks():
    """As searchsorted's docstring and the README say: nothing where binary
    search is the kernel anyway, the order as it goes where it merges."""
    with tuning.use_cpu_config(tuning.CpuConfig(bisect_ratio=8.0, runs_ratio=1000.0)):
        bisect = info_report(10**8, 10, "float32")
        merge = info_report(10**6, 10**6, "float32")
    bisect_line = next(line for line in bisect.splitlines() if "CPU kernel:" in line)
    merge_line = next(line for line in merge.splitlines() if "CPU kernel:" in line)
    assert "bisect for sorted needles" in bisect_line and "nothing checked" in bisect_line
    assert "checking the order" not in bisect_line
    assert "merge for sorted needles" in merge_line and "checking the order" in merge_line


def test_bad_arguments_exit_2(tmp_path):
    done = run("-m", "jaxsearch", "bench", "--sizes", "ten", tmp_path=tmp_path)
    assert done.returncode == 2 and "not a number" in done.stderr


def test_parsers():
    assert parse_count("1e6") == 10**6 and parse_counts("1e3, 2000") == (1000, 2000)
    assert parse_dtypes("float32,int64") == ("float32", "int64")
    for bad in ("0", "1.5", "-3"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_count(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        parse_dtypes("float33")
    assert parse_ratios("1e-2,100") == (0.01, 100.0)
    for bad in ("0", "x", "1,-2"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_ratios(bad)
