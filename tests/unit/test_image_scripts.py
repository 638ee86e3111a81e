"""The image's entry scripts run what the wheel's console scripts run (pyproject.toml [project.scripts]).

The image writes its own scripts (pip --target's are made for the build machine's python), so nothing ties
them to the wheel's entry points but this test. dra_migrate.cli.entry is where Ctrl-C during start-up and
SIGTERM during shut-down end the process with one line and 130/143; a script that calls
dra_migrate.cli.main directly loses that in the in-cluster Job, whose pod is stopped by SIGTERM.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
IN_IMAGE = ("dra-migrate", "kubectl-dra_migrate")  # kubectl's completion helper has no use in a container


def test_the_containerfile_scripts_are_the_wheels() -> None:
    text = (ROOT / "Containerfile").read_text()
    written = {
        name: f"{module}:{func}"
        for module, func, name in re.findall(
            r"from (dra_migrate[\w.]+) import (\w+)\\n\w+\(\)\\n'\s*\\?\s*>+\s*/app/usr/local/bin/(\S+)", text
        )
    }
    assert written == {name: SCRIPTS[name] for name in IN_IMAGE}


def test_the_image_build_scripts_are_the_wheels() -> None:
    text = (ROOT / "tools" / "image" / "build").read_text()
    loop = re.search(
        r"for script in ([^;]+); do\n\s*printf '#!/usr/bin/python3\\nfrom (dra_migrate[\w.]+) import", text
    )
    assert loop
    written = {s.split(":")[0]: f"{loop.group(2)}:{s.split(':')[1]}" for s in loop.group(1).split()}
    assert written == {name: SCRIPTS[name] for name in IN_IMAGE}
