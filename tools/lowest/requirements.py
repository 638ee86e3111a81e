#!/usr/bin/env python3
"""Print pyproject.toml's runtime dependencies pinned to their lowest allowed versions (`make test-lowest`).

`make install` installs the newest release of each dependency, so only the newest are ever tested; users'
environments and distro packages hold older releases the bounds allow. Each `>=X` becomes `==X` (other
specifiers, such as an upper bound, and environment markers are kept); a dependency with no `>=` bound is
refused, since "its lowest" would then mean whatever pip finds first. Standard library only: it runs on the
system's python3 before any venv exists.

Usage: requirements.py [PYPROJECT]   (default: pyproject.toml; prints one requirement a line)
"""

from __future__ import annotations

import re
import sys
import tomllib

# A PEP 508 requirement without extras or URLs (none of ours has them): name, specifiers, optional marker.
_REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<specs>[^;]*?)\s*(?:;\s*(?P<marker>.*))?$")


def lowest(requirement: str) -> str:
    """`name>=X,<Y; marker` -> `name==X,<Y; marker`; ValueError when there is no single `>=` bound."""
    match = _REQUIREMENT.match(requirement)
    if match is None or "[" in requirement or "@" in requirement:
        raise ValueError(f"cannot read the requirement {requirement!r}")
    specs = [s.strip() for s in match["specs"].split(",") if s.strip()]
    floors = [s for s in specs if s.startswith(">=")]
    if len(floors) != 1:
        raise ValueError(f"{match['name']}: no single lower bound (>=) to test at: {requirement!r}")
    pinned = ",".join("==" + s[2:].strip() if s in floors else s for s in specs)
    marker = f"; {match['marker']}" if match["marker"] else ""
    return f"{match['name']}{pinned}{marker}"


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else "pyproject.toml"
    with open(path, "rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    try:
        lines = [lowest(r) for r in dependencies]
    except ValueError as e:
        print(f"error: {path}: {e}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
