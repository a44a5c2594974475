"""Argument types shared by the ``toolguard`` commands."""

from __future__ import annotations

import argparse

__all__ = ["positive_int"]


def positive_int(text: str) -> int:
    """``text`` as a positive number of bytes (``--max-body-bytes``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"expected a positive number of bytes, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value
