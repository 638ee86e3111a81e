"""A string literal with no closing quote is a syntax error at once, however many escapes it holds: celpy's
string terminals matched each escape two ways and backtracked through 2**escapes splits (a 150-byte
selector ran for minutes; found by fuzzing the CEL compiler with atheris)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dra_migrate.dra.cel import SelectorError, compile_selector

ESCAPES = "".join(f"\\x{i:02X} " for i in range(1, 48))  # 47 escapes: 2**47 splits for the old lexer
UNTERMINATED = [f"('{ESCAPES}", f'"{ESCAPES}', f"'''{ESCAPES}", f"b'{ESCAPES}", f"r\"{ESCAPES}\\'"]


@pytest.mark.parametrize("expression", UNTERMINATED)
def test_an_unterminated_string_of_many_escapes_is_a_syntax_error(expression: str) -> None:
    # In a child process with a bound far above the milliseconds it takes: on the old lexer it never ends.
    code = (
        "import sys\nfrom dra_migrate.dra.cel import SelectorError, compile_selector\n"
        "try:\n    compile_selector(sys.argv[1])\nexcept SelectorError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, expression], capture_output=True, text=True, timeout=120)
    assert "Syntax error" in done.stdout, done.stderr


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        (r"'\x41\''", "A'"),
        (r'"a\"b"', 'a"b'),
        (r"'\u00e9\\'", "é\\"),
        ("'''a\nb\\''''", "a\nb'"),
        (r'r"\d+"', "\\d+"),
        ("'\"'", '"'),
    ],
)
def test_string_literals_still_read_as_cel_go_reads_them(literal: str, value: str) -> None:
    assert compile_selector(f"{literal} == {value!r}".replace("\\\\", "\\\\")) is not None
    assert compile_selector(f"size({literal}) == {len(value)}").matches({}, "d") is True


def test_an_unknown_escape_is_still_refused() -> None:
    with pytest.raises(SelectorError, match="Syntax error"):
        compile_selector(r"'\d' == 'd'")


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("size([1, 2].map(n, n > 1, n)) == 1", True),
        ("[1, 2, 3].map(n, n > 1, n * 10)[1] == 30", True),
        ("['a', 'bb'].map(s, size(s) > 1, s + '!')[0] == 'bb!'", True),
        ("size([1, 2].map(n, n > 5, n)) == 1", False),
    ],
)
def test_the_three_argument_map_compiles(expression: str, expected: bool) -> None:
    # Its rewrite to filter+map spliced the receiver where no placeholder expr was: an AssertionError that
    # compile_selector relabelled "cannot read this expression", for every such selector (found by fuzzing).
    assert compile_selector(expression).matches({}, "gpu.nvidia.com") is expected
