"""Smoke test of benchmarks/bench_judge.py: it runs and reports every row (no timing checks)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import toolguard

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_judge  # noqa: E402

LABELS = [
    "1 guarded call, no judge",
    "1 guarded call, instant judge",
    "1 guarded call, instant judge, cached verdicts",
    "1 guarded call, 2 ms judge",
    "4 guarded calls, no judge",
    "4 guarded calls, instant judge",
    "4 guarded calls, instant judge, cached verdicts",
    "4 guarded calls, 2 ms judge",
]
NUMBER = re.compile(r"^-?[\d,]+\.\d\d?$")


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = bench_judge.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_quick_run_prints_every_row_with_its_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_main(capsys, "--quick", "--rounds", "1", "--delay-ms", "2")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith(f"toolguard {toolguard.__version__} | CPython ")
    assert lines[0].endswith(" | quick mode, 1 rounds")
    assert lines[1] == (
        "judge model: scripted, answering at once or after 2 ms;"
        " the judge informs (auto_approve=False)"
    )
    assert re.split(r"\s{2,}", lines[3]) == [
        "turn",
        "median µs",
        "best µs",
        "added µs",
        "x no judge",
    ]
    assert set(lines[4]) == {"-", " "}
    rows = {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line) for line in lines[5:13])}
    assert list(rows) == LABELS
    for label, cells in rows.items():
        assert len(cells) == 4, label
        assert all(NUMBER.match(c) for c in cells), (label, cells)
    assert rows["1 guarded call, no judge"][2:] == ["0.00", "1.00"]
    assert rows["4 guarded calls, no judge"][2:] == ["0.00", "1.00"]
    assert lines[13] == ""
    assert re.fullmatch(
        r"4 calls judged concurrently: the 2 ms judge adds [\d,.]+ ms to a turn of 4 calls,"
        r" [\d,.]+ ms to a turn of 1",
        lines[14],
    )
    assert len(lines) == 15


def test_the_json_report_lists_every_row(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "--quick", "--delay-ms", "1", "--json")
    assert (code, err) == (0, "")
    report: dict[str, Any] = json.loads(out)
    assert sorted(report) == ["environment", "mode", "rows", "settings"]
    assert report["mode"] == "quick"
    assert report["settings"] == {"rounds": 3, "turns": 2, "slow_turns": 1, "delay_ms": 1.0}
    assert [(r["label"], r["calls"], sorted(r)) for r in report["rows"]] == [
        (
            label.replace("2 ms", "1 ms"),
            int(label[0]),
            ["added_us", "best_us", "calls", "label", "median_us", "ratio"],
        )
        for label in LABELS
    ]
    baselines = [r for r in report["rows"] if r["label"].endswith("no judge")]
    assert [(r["added_us"], r["ratio"]) for r in baselines] == [(0.0, 1.0), (0.0, 1.0)]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--rounds", "0"], "--rounds must be at least 1"),
        (["--delay-ms", "0"], "--delay-ms must be more than 0 and at most 10000"),
    ],
)
def test_bad_options_exit_2(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        bench_judge.main(argv)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"bench_judge.py: error: {error}"
