"""``python -m toolguard``: the command line (see :mod:`toolguard._cli.main`)."""

from __future__ import annotations

from toolguard._cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
