"""Run the CLI and SIGKILL it right after a given journal record is stored: a crash at that step boundary.

    python tests/integration/crashing.py "<stepId>:<start|end>" apply PLAN --kubeconfig ... --yes

The hook lives here, not in the product: this wrapper patches `Journal.record` and `ClusterJournal.record`
(the file and the in-cluster journal) in its own process only. A real SIGKILL (no cleanup, no `finally`,
the Lease left held) at a deterministic boundary; when the boundary is reached, the other lanes of the
wave are wherever they are — typically mid-step.

With DRA_MIGRATE_PAUSE_MARK=FILE it does not kill itself at the boundary: it writes FILE and stops that
lane there, the process alive and renewing its Lease, for the test to contend with it and then SIGKILL it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from dra_migrate.execute.cluster_journal import ClusterJournal
from dra_migrate.execute.journal import Journal


def main() -> None:
    at = sys.argv[1]
    pause_mark = os.environ.get("DRA_MIGRATE_PAUSE_MARK")

    def hooked(record: Any) -> Any:
        def record_then_maybe_die(self: Any, event: str, **fields: Any) -> Any:
            out = record(self, event, **fields)
            if f"{fields.get('stepId')}:{event}" == at:
                if pause_mark:
                    with open(pause_mark, "w") as f:
                        f.write(str(os.getpid()))
                    time.sleep(3600)  # this lane stops here; the test SIGKILLs the process
                os.kill(os.getpid(), signal.SIGKILL)
            return out

        return record_then_maybe_die

    Journal.record = hooked(Journal.record)  # type: ignore[method-assign]
    ClusterJournal.record = hooked(ClusterJournal.record)  # type: ignore[method-assign]
    from dra_migrate.cli.main import main as cli

    sys.argv = ["dra-migrate", *sys.argv[2:]]
    cli()


if __name__ == "__main__":
    main()
