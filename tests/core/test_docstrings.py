"""Tests for the docstring parser behind tool descriptions and parameter descriptions."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard._core.docstrings import ParsedDocstring, parse_docstring

EMPTY = ParsedDocstring(summary="", description="", params={}, returns=None, style="plain")


# --- plain ---------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", [None, "", "   ", "\n\n\t\n"])
def test_none_empty_and_blank_give_empty_plain(doc: str | None) -> None:
    """None, "" and whitespace-only docstrings all parse to the empty plain result."""
    assert parse_docstring(doc) == EMPTY


def test_defaults_are_the_empty_result() -> None:
    """ParsedDocstring() with no arguments equals the empty plain result."""
    assert ParsedDocstring() == EMPTY


def test_one_line() -> None:
    """A one-line docstring is both summary and description."""
    assert parse_docstring("Delete a file.") == ParsedDocstring(
        summary="Delete a file.",
        description="Delete a file.",
        params={},
        returns=None,
        style="plain",
    )


def test_summary_spanning_two_lines() -> None:
    """A two-line first paragraph is joined with a space in the summary only."""
    doc = """Delete a file
    from the workspace.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Delete a file from the workspace.",
        description="Delete a file\nfrom the workspace.",
        params={},
        returns=None,
        style="plain",
    )


def test_description_with_two_paragraphs() -> None:
    """Paragraphs are separated by one blank line, however many there were."""
    doc = """Delete a file.

        The file is moved to the trash
        first.



        Nothing is deleted for good.
        """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Delete a file.",
        description=(
            "Delete a file.\n\n"
            "The file is moved to the trash\nfirst.\n\n"
            "Nothing is deleted for good."
        ),
        params={},
        returns=None,
        style="plain",
    )


def test_description_keeps_relative_indentation() -> None:
    """Indented blocks (lists, code) in the description keep their relative indentation."""
    doc = """Run a command.

    Usage::

        run("ls")
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Run a command.",
        description='Run a command.\n\nUsage::\n\n    run("ls")',
        params={},
        returns=None,
        style="plain",
    )


def test_windows_line_endings() -> None:
    """CRLF and lone CR line endings are treated as newlines."""
    doc = "Summary.\r\n\r\nArgs:\r\n    path: The\r\n        path.\r    force: Force.\r\n"
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary.",
        description="Summary.",
        params={"path": "The path.", "force": "Force."},
        returns=None,
        style="google",
    )


def test_prose_with_colon_is_not_a_section() -> None:
    """A line ending in a colon that is not a known section name stays in the description."""
    doc = """Summary.

    For example:
        f(1)

    Args:
        x: The x.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary.",
        description="Summary.\n\nFor example:\n    f(1)",
        params={"x": "The x."},
        returns=None,
        style="google",
    )


# --- Google ----------------------------------------------------------------------------------


def test_google_full() -> None:
    """Types in parentheses, multi-line descriptions, *args/**kwargs and Returns with a type."""

    def delete(path: str, force: bool, *args: str, **kwargs: int) -> int:
        """Delete files.

        Deletes the given path, recursively.

        Args:
            path (str): The path to
                delete, relative to the
                workspace.
            force (bool, optional): Skip the trash.
            *args: Extra paths.
            **kwargs (int): Per-path retry counts.

        Returns:
            int: The number of files
            deleted.
        """
        return 0

    assert parse_docstring(inspect.getdoc(delete)) == ParsedDocstring(
        summary="Delete files.",
        description="Delete files.\n\nDeletes the given path, recursively.",
        params={
            "path": "The path to delete, relative to the workspace.",
            "force": "Skip the trash.",
            "args": "Extra paths.",
            "kwargs": "Per-path retry counts.",
        },
        returns="The number of files deleted.",
        style="google",
    )


def test_google_raw_dunder_doc() -> None:
    """A raw, still-indented __doc__ parses the same as inspect.getdoc's cleaned text."""

    def f(x: int) -> None:
        """Do it.

        Args:
            x: The x.
        """

    assert parse_docstring(f.__doc__) == parse_docstring(inspect.getdoc(f))
    assert parse_docstring(f.__doc__) == ParsedDocstring(
        summary="Do it.",
        description="Do it.",
        params={"x": "The x."},
        returns=None,
        style="google",
    )


def test_google_param_section_aliases() -> None:
    """Arguments, Parameters, Params, Keyword Args/Arguments and Other Parameters all count."""
    doc = """Summary.

    Arguments:
        a: A.

    Parameters:
        b: B.

    Params:
        c: C.

    Keyword Args:
        d (int): D.

    Keyword Arguments:
        e: E.

    Other Parameters:
        f: F.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary.",
        description="Summary.",
        params={"a": "A.", "b": "B.", "c": "C.", "d": "D.", "e": "E.", "f": "F."},
        returns=None,
        style="google",
    )


def test_google_sections_after_args_are_ignored() -> None:
    """Raises, Example, Note, See Also, Attributes and Todo end the params and are ignored."""
    doc = """Summary.

    Args:
        x: The x.
    Raises:
        ValueError: If x is bad.
    Example:
        >>> f(x=1)
        y: not a param
    Note:
        z: not a param either.
    See Also:
        g: Another function.
    Attributes:
        attr: An attribute.
    Todo:
        * w: something.
    Warning:
        Careful.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary.",
        description="Summary.",
        params={"x": "The x."},
        returns=None,
        style="google",
    )


def test_google_blank_lines_between_entries() -> None:
    """Blank lines between (and inside) entries do not end the Args section."""
    doc = """Summary.

    Args:
        first: One.

        second: Two,

            continued after a blank line.


        third: Three.

    Returns:
        Nothing.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary.",
        description="Summary.",
        params={"first": "One.", "second": "Two, continued after a blank line.", "third": "Three."},
        returns="Nothing.",
        style="google",
    )


def test_google_prose_after_dedent_is_ignored() -> None:
    """Text dedented back to the header ends the section and is not the description."""
    doc = """Summary.

    Args:
        x: The x.
    This trailing prose is ignored.
        y: Not a param.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary.",
        description="Summary.",
        params={"x": "The x."},
        returns=None,
        style="google",
    )


def test_google_only_sections() -> None:
    """A docstring with only sections has an empty summary and description."""
    doc = """
    Args:
        x: The x.

    Returns:
        The y.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="", description="", params={"x": "The x."}, returns="The y.", style="google"
    )


def test_google_header_on_the_first_line() -> None:
    """'Args:' on the quote line: cleandoc puts entries at the header's indentation."""
    doc = """Args:
        x: The x,
            continued.
        y: The y.
    Returns:
        The z.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="",
        description="",
        params={"x": "The x, continued.", "y": "The y."},
        returns="The z.",
        style="google",
    )


def test_google_empty_and_next_line_descriptions() -> None:
    """A description may start on the next line, or be missing ("")."""
    doc = """Summary.

    Args:
        x (int):
            Described below.
        y (str):
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary.",
        description="Summary.",
        params={"x": "Described below.", "y": ""},
        returns=None,
        style="google",
    )


def test_google_unparseable_and_duplicate_entries() -> None:
    """Non-identifier names are skipped with their continuation; the first duplicate wins."""
    doc = """Summary.

    Args:
        x: First.
        x: Second.
        2x: Starts with a digit.
        a.b: Dotted.
            Still the dotted entry.
        café: Unicode names are identifiers.
        y: Badly indented
        continuation.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary.",
        description="Summary.",
        params={
            "x": "First.",
            "café": "Unicode names are identifiers.",
            "y": "Badly indented continuation.",
        },
        returns=None,
        style="google",
    )


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("Returns:\n    int: The sum.", "The sum."),
        ("Returns:\n    dict[str, int] | None: The mapping.", "The mapping."),
        ("Returns:\n    int:", "int"),
        ("Returns:\n    The mapping: keys to values.", "The mapping: keys to values."),
        ("Return:\n    The sum.", "The sum."),
        ("Yields:\n    Lines,\n    one by one.", "Lines, one by one."),
        ("Returns: The sum.", "The sum."),
        ("Returns: bool: True if it\n    worked.", "True if it worked."),
        ("Yields:\n    The first.\n\nReturns:\n    Ignored: only the first counts.", "The first."),
    ],
)  # fmt: skip
def test_google_returns(section: str, expected: str) -> None:
    """Returns/Return/Yields, inline or indented, with a leading type stripped."""
    assert parse_docstring("Summary.\n\n" + section) == ParsedDocstring(
        summary="Summary.", description="Summary.", params={}, returns=expected, style="google"
    )


def test_google_style_without_params() -> None:
    """Only an ignored section still makes the style Google, with no params."""
    assert parse_docstring("Summary.\n\nRaises:\n    ValueError: Bad.") == ParsedDocstring(
        summary="Summary.", description="Summary.", params={}, returns=None, style="google"
    )


def test_tabs_indentation() -> None:
    """Tabs are expanded, so tab-indented sections parse like space-indented ones."""
    doc = "Summary.\n\tMore.\n\n\tArgs:\n\t\tx:\tThe x\n\t\t\tcontinued.\n\t\ty (int): The y.\n"
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary. More.",
        description="Summary.\nMore.",
        params={"x": "The x continued.", "y": "The y."},
        returns=None,
        style="google",
    )


def test_odd_indentation() -> None:
    """Odd, inconsistent indentation: prose deeper than headers, 3-space entries."""
    doc = """Summary
          continued deeper.
      Args:
         x (int):
              Described on
            the next lines.
         y:   Extra   spaces.

      Returns:
       Something.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary continued deeper.",
        description="Summary\ncontinued deeper.",
        params={"x": "Described on the next lines.", "y": "Extra   spaces."},
        returns="Something.",
        style="google",
    )


def test_leading_whitespace_only_lines() -> None:
    """Leading whitespace-only lines are skipped before the summary is taken."""
    doc = "\n  \n    Indented first line.\nSecond line."
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Indented first line. Second line.",
        description="Indented first line.\nSecond line.",
        params={},
        returns=None,
        style="plain",
    )


def test_inline_returns_as_first_line_is_the_summary() -> None:
    """A first line like 'Returns: the time.' is a summary, not a Returns section."""
    assert parse_docstring("Returns: the current time.") == ParsedDocstring(
        summary="Returns: the current time.",
        description="Returns: the current time.",
        params={},
        returns=None,
        style="plain",
    )


# --- NumPy -----------------------------------------------------------------------------------


def test_numpy_full() -> None:
    """Multi-name entries, bare names, *args, Returns and ignored underlined sections."""
    doc = """Compute the distance.

    Uses the Euclidean metric.

    Parameters
    ----------
    x, y : float
        Coordinates
        on the grid.
    flag
        A flag without a type.

    *args : tuple
        Extra points.
    **kwargs
        Options.

    Returns
    -------
    float
        The distance,
        never negative.

    Raises
    ------
    ValueError
        If the points are invalid.

    Examples
    --------
    >>> distance(1, 2)
    z : int
        not a param.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Compute the distance.",
        description="Compute the distance.\n\nUses the Euclidean metric.",
        params={
            "x": "Coordinates on the grid.",
            "y": "Coordinates on the grid.",
            "flag": "A flag without a type.",
            "args": "Extra points.",
            "kwargs": "Options.",
        },
        returns="The distance, never negative.",
        style="numpy",
    )


def test_numpy_other_parameters_and_no_description() -> None:
    """Other Parameters count; an entry without description gets ""; untyped colon works."""
    doc = """Summary.

    Parameters
    ----------
    a: int
        Tight colon.
    b : str

    Other Parameters
    ----------------
    c : bool
        Rarely used.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary.",
        description="Summary.",
        params={"a": "Tight colon.", "b": "", "c": "Rarely used."},
        returns=None,
        style="numpy",
    )


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("result : int\n    The result.", "The result."),
        ("int", "int"),
        ("first : int\nsecond : str\n    The second.", "The second."),
        ("a : int\n    First.\nb : int\n    Second.", "First. Second."),
        ("The sum of the inputs.", "The sum of the inputs."),
    ],
)
def test_numpy_returns(section: str, expected: str) -> None:
    """NumPy Returns: descriptions joined, falling back to the types when undescribed."""
    doc = "Summary.\n\nReturns\n-------\n" + section
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary.", description="Summary.", params={}, returns=expected, style="numpy"
    )


def test_numpy_only_sections() -> None:
    """A NumPy docstring that starts with its Parameters section has no summary."""
    doc = """
    Parameters
    ----------
    n : int
        How many.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="", description="", params={"n": "How many."}, returns=None, style="numpy"
    )


def test_numpy_style_from_ignored_section() -> None:
    """A plain docstring with only an Examples section is NumPy-style with no params."""
    assert parse_docstring("Summary.\n\nExamples\n--------\n>>> f()") == ParsedDocstring(
        summary="Summary.", description="Summary.", params={}, returns=None, style="numpy"
    )


# --- reST --------------------------------------------------------------------------------------


def test_rest_full() -> None:
    """:param with and without types, :type/:rtype/:raises ignored, continuation lines."""
    doc = """Move a file.

    Both paths are relative.

    :param str src: The source
        path.
    :type src: str
    :param dst: The destination.
    :param dict[str, int] opts: Options.
    :param *args: Extra.
    :keyword force: Overwrite.
    :returns: The new
        path.
    :rtype: str
    :raises ValueError: If src is missing.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Move a file.",
        description="Move a file.\n\nBoth paths are relative.",
        params={
            "src": "The source path.",
            "dst": "The destination.",
            "opts": "Options.",
            "args": "Extra.",
            "force": "Overwrite.",
        },
        returns="The new path.",
        style="rest",
    )


def test_rest_blank_lines_return_and_trailing_prose() -> None:
    """Blank lines between fields, :return:, and prose after the field list is ignored."""
    doc = """Summary.

    :param x: The x.

    :param y:
        The y, on the next line.

    :return: The z.

    Trailing prose.
        Not a continuation.
    """
    assert parse_docstring(doc) == ParsedDocstring(
        summary="Summary.",
        description="Summary.",
        params={"x": "The x.", "y": "The y, on the next line."},
        returns="The z.",
        style="rest",
    )


def test_rest_only_fields() -> None:
    """A reST docstring with only fields has no summary; :raises: alone is not documentation."""
    assert parse_docstring(":param x: The x.\n:raises KeyError: Missing.") == ParsedDocstring(
        summary="", description="", params={"x": "The x."}, returns=None, style="rest"
    )


# --- the dataclass ---------------------------------------------------------------------------


def test_parsed_docstring_is_frozen() -> None:
    """ParsedDocstring is frozen and each instance gets its own params dict."""
    parsed = parse_docstring("Summary.")
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.summary = "changed"  # type: ignore[misc]
    assert ParsedDocstring().params is not ParsedDocstring().params


# --- properties ------------------------------------------------------------------------------


def _check(parsed: ParsedDocstring) -> None:
    assert isinstance(parsed, ParsedDocstring)
    assert parsed.style in ("google", "numpy", "rest", "plain")
    assert all(name and name.isidentifier() for name in parsed.params)
    assert all(isinstance(text, str) for text in parsed.params.values())
    assert parsed.returns is None or isinstance(parsed.returns, str)
    first_paragraph = parsed.description.split("\n\n")[0].split("\n")
    assert parsed.summary == " ".join(line.strip() for line in first_paragraph)


@settings(max_examples=200)
@given(st.text())
def test_arbitrary_text_never_raises(doc: str) -> None:
    """Any text parses to a ParsedDocstring whose params keys are identifiers."""
    _check(parse_docstring(doc))


_FRAGMENTS = st.sampled_from(
    [
        "Summary.", "", "  ", "\t", "Args:", "Returns:", "Returns: x", "Raises:", "Example:",
        "Keyword Args:", "    x: The x.", "    *args: A.", "    **kw (int): B.", "        more",
        "x (int): c", "Parameters", "Returns", "----------", "---", "x, y : int", "x", "int",
        ":param x: d", ":param int y:", ":type x: int", ":returns: e", ":raises E: f", ":param:",
        "    :param z: g", "2x: h", "a.b: i", "(: ):", "*", "**: j", "\r", "é: k", "x²: l",
    ]
)  # fmt: skip


@settings(max_examples=200)
@given(st.lists(_FRAGMENTS | st.text(max_size=8), max_size=14))
def test_docstring_like_text_never_raises(lines: list[str]) -> None:
    """Random mixes of headers, entries and fields parse without raising."""
    _check(parse_docstring("\n".join(lines)))
