"""Kueue on the twin: its real CRDs (sigs.k8s.io/kueue's config/components/crd/bases, from the Go module cache),
so the snapshot's ClusterQueues, ResourceFlavors and LocalQueues are recreated under Kueue's own schema rather
than a permissive one. No Kueue controller runs: the twin shows what the plan does to their quotas (nothing
here changes them), not Kueue's admission.

The CRDs are looked up in `DRA_MIGRATE_KUEUE_CRDS` (a directory of them), then in the Go module cache
(`GOMODCACHE`, else `GOPATH/pkg/mod`, else ~/go/pkg/mod) at sigs.k8s.io/kueue@v<KUEUE_VERSION>; fetch them once
with `go mod download sigs.k8s.io/kueue@v0.17.0`. Not found: the caller falls back to permissive CRDs and
says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from dra_migrate.cluster.yamlio import load_yaml_documents
from dra_migrate.sim.kube import Kube
from dra_migrate.sim.stack import CRDS, wait_established

# The Kueue release whose DRA support docs/dependents.md cites (DRAExtendedResources, v0.17).
KUEUE_VERSION = os.environ.get("KUEUE_VERSION", "0.17.0")
KUEUE_MODULE = "sigs.k8s.io/kueue"
# The kinds the tool reads (cluster/kinds.py DEPENDENT_KINDS), by their CRD file.
CRD_FILES = (
    "kueue.x-k8s.io_resourceflavors.yaml",
    "kueue.x-k8s.io_clusterqueues.yaml",
    "kueue.x-k8s.io_localqueues.yaml",
)
FETCH_HINT = f"fetch them once with: go mod download {KUEUE_MODULE}@v{KUEUE_VERSION}"


def kueue_crd_dir() -> Path | None:
    """Where Kueue's CRD manifests are, or None."""
    configured = os.environ.get("DRA_MIGRATE_KUEUE_CRDS")
    if configured:
        return Path(configured)
    modcache = os.environ.get("GOMODCACHE") or str(
        Path(os.environ.get("GOPATH") or Path.home() / "go").expanduser() / "pkg" / "mod"
    )
    here = Path(modcache) / f"{KUEUE_MODULE}@v{KUEUE_VERSION}" / "config" / "components" / "crd" / "bases"
    return here if all((here / f).is_file() for f in CRD_FILES) else None


def install_kueue_crds(api_client: Any, where: Path, timeout: float = 30) -> list[str]:
    """Kueue's own CRDs for the kinds the tool reads, as released (their conversion is None: no webhook runs
    here, and v1beta1 and v1beta2 share these fields). Returns the CRD names."""
    kube = Kube(api_client)
    names = []
    for file in CRD_FILES:
        [crd] = list(load_yaml_documents((where / file).read_text(), str(where / file)))
        crd.setdefault("metadata", {}).pop("annotations", None)
        kube.create_or_exists(CRDS, crd)
        names.append(str(crd["metadata"]["name"]))
    for name in names:
        wait_established(kube, name, timeout)
    return names


def fetch_kueue_crds() -> int:
    """`go mod download` of the Kueue release into the Go module cache (where `kueue_crd_dir` looks), for
    `twin build`; its output goes to stderr. 0 when they are there afterwards."""
    if kueue_crd_dir() is not None:
        return 0
    go = shutil.which("go")
    if go is None:
        return 1
    env = {**os.environ, "GOFLAGS": "", "GOWORK": "off"}
    done = subprocess.run([go, "mod", "download", f"{KUEUE_MODULE}@v{KUEUE_VERSION}"], env=env, check=False,
                          stdin=subprocess.DEVNULL, cwd=Path.home())  # fmt: skip
    return 0 if done.returncode == 0 and kueue_crd_dir() is not None else 1
