"""The twin's control plane: the same binaries and scripts as the integration tier (tools/k8s).

Binaries are looked up, in order, in the build cache (`~/.cache/dra-migrate/k8s/v1.37.2`, or
`DRA_MIGRATE_K8S_CACHE`), in `KUBEBUILDER_ASSETS` (envtest's layout: etcd and kube-apiserver only — it has
no scheduler or controller manager) and on `PATH`; a missing one is an error that names the command that
builds it. The scripts (tools/k8s/build, up, down) ship in the package (`dra_migrate.bundled`), or come from
`DRA_MIGRATE_TOOLS`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from dra_migrate.bundled import bundled
from dra_migrate.errors import InputError
from dra_migrate.sim.kueue import fetch_kueue_crds
from dra_migrate.sim.kwok import die_with_parent, require_linux

K8S_VERSION = os.environ.get("K8S_VERSION", "1.37.2")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
BUILD_HINT = "build them once with: dra-migrate twin build (about 6 minutes on 2 cores)"


def tools_dir() -> Path:
    configured = os.environ.get("DRA_MIGRATE_TOOLS")
    here = Path(configured) if configured else bundled("tools/k8s/up").parent
    if not (here / "up").is_file():
        raise InputError(
            f"the twin's scripts are not at {here}",
            "unset DRA_MIGRATE_TOOLS, or point it at a dra-migrate checkout's tools/k8s directory",
        )
    return here


def cache_dir() -> Path:
    root = os.environ.get("DRA_MIGRATE_K8S_CACHE") or str(Path.home() / ".cache" / "dra-migrate" / "k8s")
    return Path(root) / f"v{K8S_VERSION}"


def find_binaries() -> dict[str, tuple[Path | None, str]]:
    """Each binary -> (where it was found, which source), or (None, "missing")."""
    places: list[tuple[str, Path]] = [("cache", cache_dir())]
    if os.environ.get("KUBEBUILDER_ASSETS"):
        places.append(("KUBEBUILDER_ASSETS", Path(os.environ["KUBEBUILDER_ASSETS"])))
    out: dict[str, tuple[Path | None, str]] = {}
    for name in BINARIES:
        found: tuple[Path | None, str] = (None, "missing")
        for source, where in places:
            if (where / name).is_file() and os.access(where / name, os.X_OK):
                found = (where / name, source)
                break
        else:
            on_path = shutil.which(name)
            if on_path:
                found = (Path(on_path), "PATH")
        out[name] = found
    return out


def binary_dir(into: Path) -> Path:
    """A directory laid out as tools/k8s/up expects (`<dir>/v<version>/<binary>`), made of links."""
    found = find_binaries()
    missing = [n for n, (p, _) in found.items() if p is None]
    if missing:
        raise InputError(f"no {', '.join(missing)} found (build cache, KUBEBUILDER_ASSETS, PATH)", BUILD_HINT)
    bins = into / f"v{K8S_VERSION}"
    bins.mkdir(parents=True, exist_ok=True)
    for name, (path, _) in found.items():
        assert path is not None
        link = bins / name
        if not link.exists():
            link.symlink_to(path)
    (bins / ".complete").touch()
    return into


# The twin's Go processes (etcd, API server, controller manager, scheduler, kwok) collect garbage when their
# heap has grown by this percentage of the live heap (GOGC; Go's default 100: the `runtime` package's
# documentation, go.dev/doc/gc-guide), unless the user's environment sets GOGC. A twin is private and
# short-lived: on the 2,000-node rehearsal the API server's heap was 0.8 GB live, and at 200 its collector
# took 17.5 s of its CPU (`go_cpu_classes_gc_total_cpu_seconds_total`) — the 2-core machine's busiest
# process, whose answers every lane and every kwok play waits on. The cost is memory: a heap may reach three
# times the live heap instead of twice (the twin's peak resident memory 4.3-5.2 GiB against 3.1 GiB at 2,000
# nodes, bench/rehearse.py `twinPeakRssMiB`).
TWIN_GOGC = 200


def go_env(go_gc: int | None) -> dict[str, str]:
    """GOGC for Go processes the tool starts (the twin's control plane, kwok): `go_gc` unless the user set
    GOGC themselves, which is kept (nothing when `go_gc` is None). GOGC is the Go runtime's heap growth
    before a collection, in percent of the live heap (default 100; the `runtime` package's documentation)."""
    if go_gc is None or "GOGC" in os.environ:
        return {}
    return {"GOGC": str(go_gc)}


# The components tools/k8s/up launches are not the rehearsal's children (they are reparented when `up` exits),
# so a rehearsal killed outright (SIGKILL, the out-of-memory killer) ran no cleanup and left etcd, the API
# server, the controller manager and the scheduler running. This watchdog is its child: the kernel sends it
# SIGTERM when the rehearsal dies (PR_SET_PDEATHSIG, as kwok gets: sim/kwok.py), and it then runs
# tools/k8s/down on the plane and removes the scratch directory. `bash -c WATCHDOG down plane scratch`.
WATCHDOG = 'trap \'"$0" "$1"; rm -rf -- "$2"; exit 0\' TERM; while :; do sleep 1 & wait $!; done'


def _watchdog(tools: Path, plane: Path, root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["bash", "-c", WATCHDOG, str(tools / "down"), str(plane), str(root)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # Ctrl-C is the rehearsal's to handle (it stops the twin itself)
        preexec_fn=die_with_parent,
    )


def _dismiss(watchdog: subprocess.Popen[bytes] | None) -> None:
    """The watchdog ended without running its cleanup (the caller runs it)."""
    if watchdog is not None and watchdog.poll() is None:
        watchdog.kill()
        watchdog.wait()


@dataclass
class Twin:
    """A running private control plane; `stop` (or leaving the `with`) tears it down."""

    dir: Path
    kubeconfig: Path
    _scratch: tempfile.TemporaryDirectory[str]
    _watchdog: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(
        cls,
        timeout: float = 300,
        client_qps: int | None = None,
        node_grace_s: int | None = None,
        audit: bool = True,
        disable_admission: tuple[str, ...] = (),
        go_gc: int | None = None,
    ) -> Twin:
        """`client_qps`: the controller manager's and scheduler's client rate (tools/k8s/up
        DRA_MIGRATE_CLIENT_QPS); None keeps their defaults, which are sized for small clusters.
        `node_grace_s`: the node lifecycle controller's grace (DRA_MIGRATE_NODE_GRACE), for kubelets that
        renew their Leases less often than kubelet's 10 s. `audit`: False turns the audit log off (nobody
        reads the twin's, and it is written for every request). `disable_admission`: admission plugins the
        API server runs without (DRA_MIGRATE_DISABLE_ADMISSION). `go_gc`: the components' GOGC (`go_env`)."""
        require_linux("the twin's control plane")
        tools = tools_dir()
        scratch = tempfile.TemporaryDirectory(prefix="dra-migrate-twin-")
        root = Path(scratch.name)
        env = {**os.environ, **go_env(go_gc), "DRA_MIGRATE_K8S_CACHE": str(binary_dir(root / "bin"))}
        if client_qps is not None:
            env["DRA_MIGRATE_CLIENT_QPS"] = str(client_qps)
        if node_grace_s is not None:
            env["DRA_MIGRATE_NODE_GRACE"] = str(node_grace_s)
        env["DRA_MIGRATE_AUDIT"] = "1" if audit else "0"
        if disable_admission:
            env["DRA_MIGRATE_DISABLE_ADMISSION"] = ",".join(disable_admission)
        plane = root / "k8s"
        watchdog = _watchdog(tools, plane, root)
        try:
            res = subprocess.run(
                [str(tools / "up"), str(plane)],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except BaseException as e:
            # Timed out, or stopped (Ctrl-C, SIGTERM: rehearse/run.py `_terminated_as_exit`) while `up` was
            # starting the plane: subprocess.run has killed `up` (SIGKILL; after 0.25 s for Ctrl-C) before
            # its own trap could stop what it launched, so `down` stops the components it recorded.
            _dismiss(watchdog)
            subprocess.run([str(tools / "down"), str(plane)], capture_output=True, check=False)
            scratch.cleanup()
            if isinstance(e, subprocess.TimeoutExpired):
                raise InputError(f"the twin's control plane did not start within {timeout:.0f}s", "see --debug") from e
            raise
        if res.returncode != 0:
            _dismiss(watchdog)
            scratch.cleanup()
            last = (res.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise InputError(f"the twin's control plane did not start: {last}", BUILD_HINT)
        return cls(plane, Path(res.stdout.strip().splitlines()[-1]), scratch, watchdog)

    def stop(self) -> None:
        _dismiss(self._watchdog)
        subprocess.run([str(tools_dir() / "down"), str(self.dir)], capture_output=True, check=False)
        self._scratch.cleanup()

    def __enter__(self) -> Twin:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def build() -> int:
    """Run the same Go builds the tests use, into the user's cache: the control plane, then KWOK (which plays
    the twin's nodes: sim/kwok.py; a no-op when cached), and fetch Kueue's CRDs (the twin creates the
    snapshot's Kueue queues under them: sim/kueue.py); output goes to stderr."""
    require_linux("twin build (the twin's control plane)")
    for script in (tools_dir() / "build", bundled("tools/kwok/build")):
        code = subprocess.run([str(script)], stdin=subprocess.DEVNULL, check=False).returncode
        if code:
            return code
    return fetch_kueue_crds()
