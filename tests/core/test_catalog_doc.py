"""docs/messages.md documents the message catalogs exactly (both languages, every key)."""

from __future__ import annotations

import re
from pathlib import Path

from toolguard._core.catalog import _CATALOGS

DOC = Path(__file__).resolve().parents[2] / "docs" / "messages.md"
ROW = re.compile(r"^\| `(?P<key>[a-z_]+)` \| `(?P<en>.*)` \| `(?P<id>.*)` \|$")


def test_the_catalog_table_is_the_catalog() -> None:
    documented = {}
    for line in DOC.read_text().splitlines():
        found = ROW.match(line)
        if found:
            documented[found["key"]] = (
                found["en"].replace("\\|", "|"),
                found["id"].replace("\\|", "|"),
            )
    expected = {key: (text, _CATALOGS["id"][key]) for key, text in _CATALOGS["en"].items()}
    assert documented == expected


def test_both_languages_have_the_same_keys_and_fields() -> None:
    fields = re.compile(r"\{(\w+)")
    assert _CATALOGS["en"].keys() == _CATALOGS["id"].keys()
    for key, text in _CATALOGS["en"].items():
        assert set(fields.findall(text)) == set(fields.findall(_CATALOGS["id"][key])), key
