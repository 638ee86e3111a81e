"""A scalar shaped like a YAML timestamp that is no date (`2027-13-45`, `0000-01-01`) is refused with its
line by every reader of YAML: ruamel built a datetime from it and raised ValueError, an internal error in
snapshot, convert, plan, ignore-file and template-table reading alike (found by fuzzing with atheris)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_migrate.checks.ignore import load_ignore_file
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.claims import ConvertOptions
from dra_migrate.convert.files import convert_text
from dra_migrate.errors import InputError
from dra_migrate.plan import io as plan_io

NO_DATES = ["2027-13-45", "2027-02-30", "0000-01-01", "2027-01-01 24:00:00", "2027-1-1T1:00:00+99:00"]
POD = "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, labels: {{d: {v}}}}}\nspec: {{containers: [{{name: c}}]}}\n"


@pytest.mark.parametrize("value", NO_DATES)
def test_convert_refuses_it_with_its_document(value: str) -> None:
    with pytest.raises(InputError, match="no date"):
        convert_text(POD.format(v=value), "f.yaml", TemplateTable.builtin(), ConvertOptions())


@pytest.mark.parametrize("value", ["2027-13-45", "2027-02-30", "0000-01-01"])
def test_the_safe_readers_refuse_it_with_its_line(tmp_path: Path, value: str) -> None:
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text(POD.format(v=value))
    with pytest.raises(InputError, match=r"s.yaml:3:\d+: .*no date"):
        load_snapshot(snapshot)
    ignore = tmp_path / "i.yaml"
    ignore.write_text(f"- {{rule: gang-capacity-after, reason: r, expires: {value}}}\n")
    with pytest.raises(InputError, match=r"i.yaml:1:\d+: .*no date"):
        load_ignore_file(ignore, ["gang-capacity-after"])
    table = tmp_path / "t.yaml"
    table.write_text(f"- kind: example.com/J\n  apiVersion: {value}\n  roles: [{{template: spec.template}}]\n")
    with pytest.raises(InputError, match=r"t.yaml:2:\d+: .*no date"):
        TemplateTable.builtin().extended(table)


def test_a_plan_file_refuses_it_with_its_line(tmp_path: Path) -> None:
    lines = Path("tests/golden/plans/demo.yaml").read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if i > 3 and ": " in line and not line.lstrip().startswith("#"))
    lines[at] = lines[at].split(": ")[0] + ": 2027-13-45\n"
    path = tmp_path / "p.yaml"
    path.write_text("".join(lines))
    with pytest.raises(InputError, match=rf"p.yaml:{at + 1}: .*no date"):
        plan_io.load(path)


def test_real_dates_still_read(tmp_path: Path) -> None:
    ignore = tmp_path / "i.yaml"
    ignore.write_text("- {rule: gang-capacity-after, reason: r, expires: 2027-01-31}\n")
    assert str(load_ignore_file(ignore, ["gang-capacity-after"])[0].expires) == "2027-01-31"


@pytest.mark.parametrize("offset", ["+23:59", "-23:59", "+05:30", "-1", "Z"])
def test_a_utc_offset_under_a_day_still_reads(offset: str) -> None:
    # The refusal of +99:00 (a four-day "offset" that ruamel.yaml 0.18.0 silently moved the date by) stops
    # short of any offset Python's timezone takes.
    convert_text(POD.format(v=f"2027-01-01T01:00:00{offset}"), "f.yaml", TemplateTable.builtin(), ConvertOptions())


def test_an_offset_of_a_day_or_more_is_refused_by_the_safe_reader_too(tmp_path: Path) -> None:
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n  labels:\n    d: 2027-1-1T1:00:00+24:00\n")
    with pytest.raises(InputError, match=r"s.yaml:6:\d+: .*no date"):
        load_snapshot(snapshot)
