"""krew_manifest.py VERSION URI ARCHIVE — the krew plugin manifest (krew.sigs.k8s.io plugin-manifest format,
apiVersion krew.googlecontainertools.github.com/v1alpha2) for the archive tools/release/release made.

The archive holds a launcher script, not a native binary, so one entry serves Linux and macOS on any
architecture (it needs python3 >= 3.11).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path


def manifest(version: str, uri: str, archive: Path) -> str:
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    # JSON is YAML: no YAML library needed for a fixed shape, and the output is unambiguous.
    doc = {
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": "dra-migrate"},
        "spec": {
            "version": f"v{version}",
            "shortDescription": "Migrate GPU fleets from the NVIDIA device plugin to DRA",
            "description": (
                "Inventory, readiness checks, a reviewable staged plan, rehearsal on a twin, a journaled and\n"
                "resumable apply, and the audit report, for moving Kubernetes GPU fleets from the NVIDIA device\n"
                "plugin's extended resources to Dynamic Resource Allocation. Needs python3 >= 3.11; the first\n"
                "run installs the bundled wheel into ~/.cache/dra-migrate/krew.\n"
            ),
            "caveats": "The first run installs Python dependencies from PyPI (or PIP_INDEX_URL).\n",
            "platforms": [
                {
                    "selector": {"matchExpressions": [{"key": "os", "operator": "In", "values": ["linux", "darwin"]}]},
                    "uri": uri,
                    "sha256": digest,
                    "bin": "kubectl-dra_migrate",
                }
            ],
        },
    }
    return json.dumps(doc, indent=2) + "\n"


if __name__ == "__main__":
    version, uri, archive = sys.argv[1:4]
    sys.stdout.write(manifest(version, uri, Path(archive)))
