"""A file whose document is a scalar or a list is refused by the fast reader, never handed to the strict
(pure-Python) one: a 50 MB single token took 25 s to be told it is not a plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_migrate.errors import InputError
from dra_migrate.plan import io as plan_io
from dra_migrate.plan import stream


@pytest.mark.parametrize("text", ["a" * 200_000, "- a\n- b\n", "42\n", "'quoted'\n", "[1, 2]\n"])
def test_a_document_that_is_not_a_mapping_is_refused_without_the_strict_reader(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)

    def strict(*_: object) -> None:
        raise AssertionError("the strict reader was asked")

    monkeypatch.setattr(plan_io, "_strict", strict)
    with pytest.raises(InputError, match=r"not a plan \(expected a mapping\)"):
        plan_io.load(path)
    with pytest.raises(InputError, match=r"not a plan \(expected a mapping\)"):
        stream.outline(path)
