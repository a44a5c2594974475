"""benchmarks/classifier_coverage.py: its figures, and the docs that quote them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import classifier_coverage  # noqa: E402

FIGURES = [
    "594 tool names from 41 sources (tool_names.csv)",
    "targets: writes guarded >= 95.0%, reads asked <= 5.0%",
    "",
    "classifier                writes guarded   reads asked     writes target  reads target",
    "------------------------  ---------------  --------------  -------------  ------------",
    "SEED_VERBS                61.2% (150/245)  0.3% (1/349)    missed         met",
    "default                   99.6% (244/245)  10.0% (35/349)  met            missed",
    'default, unknown="allow"  97.1% (238/245)  4.6% (16/349)   met            met',
]


def test_the_benchmark_prints_these_figures(capsys: pytest.CaptureFixture[str]) -> None:
    """Over the committed names the three classifiers score exactly this."""
    assert classifier_coverage.main([]) == 0
    assert capsys.readouterr().out.splitlines() == FIGURES


def test_the_benchmarks_readme_quotes_the_figures() -> None:
    """benchmarks/README.md shows the run's output as it is."""
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    quoted = "$ .venv/bin/python benchmarks/classifier_coverage.py\n" + "\n".join(FIGURES) + "\n```"
    assert quoted in text


def test_the_classifier_page_quotes_the_figures() -> None:
    """docs/classifier.md's table and prose give the same figures."""
    text = (ROOT / "docs" / "classifier.md").read_text(encoding="utf-8")
    for row in [
        (
            "| `Classifier(verbs=SEED_VERBS)` (13 verbs, no read verbs)"
            " | 61.2% (150/245) | 0.3% (1/349) |"
        ),
        "| `Classifier()` (the default) | 99.6% (244/245) | 10.0% (35/349) |",
        '| `Classifier(unknown="allow")` | 97.1% (238/245) | 4.6% (16/349) |',
    ]:
        assert row + "\n" in text
    prose = " ".join(text.split())
    assert 'over 594 real tool names, `unknown="allow"` lets 7 of 245 writes run unseen' in prose
    assert "costs 19 more needless asks among 349 reads" in prose
    assert (
        "of 594 real tool names (`benchmarks/data/tool_names.csv`):"
        " the complete tool lists of 41 sources" in prose
    )


def test_the_credentials_rule_asks_about_two_reads_of_the_list() -> None:
    """Only GitHub's two secret-scanning alert tools ask because they name credentials."""
    tools = classifier_coverage.load(classifier_coverage.DEFAULT_NAMES)
    for name in ("default", 'default, unknown="allow"'):
        classifier = classifier_coverage.CLASSIFIERS[name]
        asked = [
            (tool.name, tool.label, tool.source)
            for tool in tools
            if classifier.explain(tool.name).rule == "credentials"
        ]
        assert asked == [
            ("get_secret_scanning_alert", "read", "mcp:github-mcp-server"),
            ("list_secret_scanning_alerts", "read", "mcp:github-mcp-server"),
        ]
    for path in (ROOT / "docs" / "classifier.md", ROOT / "benchmarks" / "README.md"):
        prose = " ".join(path.read_text(encoding="utf-8").split())
        assert "`get_secret_scanning_alert` and `list_secret_scanning_alerts`" in prose
