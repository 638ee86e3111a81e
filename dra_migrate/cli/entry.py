"""The console script's entry point: Ctrl-C at any moment, start-up included, is one line and exit 130.

`dra_migrate.cli.main` imports click and, through the commands, a good deal more; an interrupt during those
imports would print a traceback, and one raised in the middle of importing a C extension can leave the
interpreter to crash (seen here: SIGSEGV) instead of unwinding. So the first statements of this module —
which the console script imports before anything else of ours — make a Ctrl-C end the process at once with
one line; `Group.get_command` hands SIGINT back to Python (`cli/interrupts.py`) once the command's module is
imported, so a running command gets KeyboardInterrupt and releases what it holds (apply's lock and
journal, rehearse's twin). Only Python's own start-up (`site`) and the two package `__init__`s (a version
string) come before: a SIGINT there is the interpreter's.
"""

import _signal  # type: ignore[import-not-found]  # built in: no Python-level import before the handler
import atexit  # built in too


def _exit_at_once(signum: int, _frame: object) -> None:
    import os
    import sys

    # SIGTERM and SIGHUP, seen as `Terminated` after start-up (cli/interrupts.py); else Ctrl-C.
    word = {15: "terminated", 1: "hung up"}.get(signum, "interrupted")
    try:
        sys.stderr.write(f"\nerror: {word}\n")
        sys.stderr.flush()
    except BaseException:  # stderr gone, or interrupted again: the exit code says it
        pass
    # As a shell reports the signal (128 + its number): dra_migrate.cli.exitcodes.INTERRUPTED, TERMINATED.
    os._exit(128 + (signum if signum in (1, 15) else 2))


_exit_at_once.dra_migrate_startup = True  # type: ignore[attr-defined]  # what graceful_interrupts replaces
_signal.signal(_signal.SIGINT, _exit_at_once)


def _ignore_the_last_instant() -> None:
    """The last exit callback (registered first, they run last-in first-out): the command is over, its
    exit code on the way out. After the callbacks CPython's finalization resets a Python-level SIGINT
    handler to SIG_DFL (Modules/signalmodule.c `_PySignal_Fini`) while no Python code runs any more, so a
    Ctrl-C in those last milliseconds killed the process by SIGINT (-2: seen in
    `test_ctrl_c_at_any_moment...`). An ignored signal is left ignored there: the command's exit code stands."""
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)


atexit.register(_ignore_the_last_instant)


def main() -> None:
    _signal.signal(_signal.SIGINT, _exit_at_once)  # again: main() may run after another handler was set
    try:
        from dra_migrate.cli.main import main as run

        run()
    except KeyboardInterrupt as e:
        _exit_at_once(getattr(e, "signum", 2), None)  # cli/interrupts.py `Terminated`: SIGTERM, SIGHUP
    finally:
        _after_the_command()


def kubectl_plugin() -> None:
    """`kubectl dra-migrate ...` (kubectl runs `kubectl-dra_migrate` from PATH), with the same Ctrl-C handling."""
    _signal.signal(_signal.SIGINT, _exit_at_once)
    try:
        from dra_migrate.cli.main import kubectl_plugin as run

        run()
    except KeyboardInterrupt as e:
        _exit_at_once(getattr(e, "signum", 2), None)  # cli/interrupts.py `Terminated`: SIGTERM, SIGHUP
    finally:
        _after_the_command()


def kubectl_complete() -> None:
    """`kubectl_complete-dra_migrate ARG... WORD`: kubectl's plugin completion helper (cli/completion.py)."""
    import sys

    from dra_migrate.cli.completion import kubectl_complete as complete

    try:
        sys.stdout.write("".join(f"{line}\n" for line in complete(sys.argv[1:])))
    except Exception:  # completion must never print a traceback into the user's shell: offer nothing
        sys.stdout.write(":1\n")  # ShellCompDirectiveError: kubectl ignores the completions


def _after_the_command() -> None:
    """The command is over (its exit code on the way out), its locks and journals released: a Ctrl-C while
    the interpreter shuts down (joining threads, atexit callbacks) ends it as at start-up, one line and 130,
    not with Python's KeyboardInterrupt traceback from an atexit callback or its death by SIGINT (-2).
    A SIGTERM or SIGHUP then is the same: one line and 143 or 129, not `Terminated` raised in a callback."""
    _signal.signal(_signal.SIGINT, _exit_at_once)
    for signum in (_signal.SIGTERM, getattr(_signal, "SIGHUP", _signal.SIGTERM)):
        if getattr(_signal.getsignal(signum), "dra_migrate_terminate", False):
            _signal.signal(signum, _exit_at_once)


if __name__ == "__main__":
    main()
