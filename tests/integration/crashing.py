"""Run the CLI and SIGKILL it right after a given journal record is on disk: a crash at that step boundary.

    python tests/integration/crashing.py "<stepId>:<start|end>" apply PLAN --kubeconfig ... --yes

The hook lives here, not in the product: this wrapper patches `Journal.record` in its own process only.
A real SIGKILL (no cleanup, no `finally`, the Lease left held) at a deterministic boundary; when the
boundary is reached, the other lanes of the wave are wherever they are — typically mid-step.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from dra_migrate.execute.journal import Journal


def main() -> None:
    at = sys.argv[1]
    record = Journal.record

    def record_then_maybe_die(self: Journal, event: str, **fields: Any) -> Any:
        out = record(self, event, **fields)
        if f"{fields.get('stepId')}:{event}" == at:
            os.kill(os.getpid(), signal.SIGKILL)
        return out

    Journal.record = record_then_maybe_die  # type: ignore[method-assign]
    from dra_migrate.cli.main import main as cli

    sys.argv = ["dra-migrate", *sys.argv[2:]]
    cli()


if __name__ == "__main__":
    main()
