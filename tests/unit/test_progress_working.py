"""Progress for slow plan commands (issue 29 item 3): a line on a terminal only once the work has taken
longer than the threshold, cleared when it ends; nothing when stderr is not a terminal."""

from __future__ import annotations

import io
import time

from dra_migrate.cli.progress import Working


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_slow_command_says_what_it_is_doing_on_a_terminal() -> None:
    tty = _Tty()
    with Working("reading plans/x.yaml", after_s=0.02, every_s=0.01, stream=tty):
        time.sleep(0.2)
    out = tty.getvalue()
    assert "reading plans/x.yaml: 0s" in out and out.endswith("\r\033[K")  # drawn, then cleared


def test_a_quick_command_and_a_pipe_stay_silent() -> None:
    tty = _Tty()
    with Working("reading", after_s=5, stream=tty):
        pass
    assert tty.getvalue() == ""
    pipe = io.StringIO()
    with Working("reading", after_s=0, every_s=0.01, stream=pipe):
        time.sleep(0.05)
    assert pipe.getvalue() == ""
