"""Fixtures of the tools' tests."""

import json

import pytest

from jaxsearch import tuning
from jaxsearch.__main__ import main


class FamilyRun:
    """`jaxsearch bench --family <family>` run by a test, into its tmp_path."""

    def __init__(self, tmp_path, capsys):
        self.tmp_path, self.capsys = tmp_path, capsys

    def quick(self, family):
        """The family's quick run, two repeats: what it printed, the path of
        the JSON it saved, and that JSON."""
        assert main(["bench", "--family", family, "--quick", "--repeats", "2",
                     "--output", str(self.tmp_path)]) == 0
        out = self.capsys.readouterr().out
        saved = self.tmp_path / f"{family}_{tuning.device_kind()}.json"
        return out, saved, json.loads(saved.read_text())

    def assert_replot_prints(self, family, saved, out, *args):
        """Read back through the family's own reader: the very table of the run."""
        assert main(["bench", "--family", family, "--replot", str(saved), *args]) == 0
        assert self.capsys.readouterr().out == out.removesuffix(f"wrote json: {saved}\n")


@pytest.fixture
def family_run(tmp_path, capsys):
    """Runs a bench family through the CLI and reads its table back."""
    return FamilyRun(tmp_path, capsys)
