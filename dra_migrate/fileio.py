"""Writing files so that a crash or a refusal never leaves half of one (snapshots, plans, reports,
converted manifests)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_writer(path: Path) -> Iterator[IO[bytes]]:
    """Write beside `path`, fsync, then rename over it: readers see the old file or the new one.

    A replaced file keeps its permissions; a new one gets the usual 0666 less the umask (mkstemp's 0600
    would hide plans and reports from the rest of a change-review team)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask()
    import tempfile  # here: commands that only read (show, status, diff) never load it

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_writer(path) as fh:
        fh.write(text.encode("utf-8"))
