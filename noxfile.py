"""Development sessions; `scripts/test` (the CI command) runs lint, types and tests at once."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.default_venv_backend = "venv"

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check."""
    session.install("-e", ".[dev]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """Strict mypy over the package and the typing tests."""
    session.install("-e", ".[all]")
    session.run("mypy")


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The test suite with every extra installed."""
    session.install("-e", ".[all]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks; they print medians (see benchmarks/README.md)."""
    session.install("-e", ".[all,bench]")
    session.run("python", "benchmarks/bench_core.py")
    session.run("python", "benchmarks/bench_cycle.py")
