"""Argument types shared by the ``toolguard`` commands."""

from __future__ import annotations

import argparse

__all__ = ["port_number", "positive_int"]


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


def port_number(text: str) -> int:
    """``text`` as a TCP port (``--port``): 1 to 65535, or 0 for a free port the system picks."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        msg = f"expected a port number from 1 to 65535 (or 0 for any free port), got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value
