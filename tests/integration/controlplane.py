"""Helpers around tools/k8s/{build,up,down} for the integration tests.

A control plane is a directory made by ``tools/k8s/up``: certificates (including the CA key, so
tests can mint client certificates for other users), ``kubeconfig`` (admin, ``system:masters``),
``env`` (ports), one ``<component>.log``/``.pid`` per process and ``audit.log`` (Metadata level,
one JSON event per request).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools" / "k8s"
K8S_VERSION = os.environ.get("K8S_VERSION", "1.37.2")


class ControlPlaneError(RuntimeError):
    """tools/k8s/build or tools/k8s/up failed; the message carries the tail of its output."""


@dataclass(frozen=True)
class ControlPlane:
    dir: Path
    kubeconfig: Path
    server: str
    # Runs tools/k8s/down if this Python process dies without calling stop() (see _WATCHDOG).
    watchdog: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)


# A pytest killed by SIGKILL (CI timeout, OOM) never runs fixture teardown, and the four servers would
# outlive it. This detached child notices its parent is gone (it gets re-parented) and runs down.
_WATCHDOG = """
import os, subprocess, sys, time
parent, down, dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
while os.getppid() == parent:
    time.sleep(1)
subprocess.run([down, dir], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


# One real node per machine: its kubelet, containerd and network namespace use fixed host paths. Every
# fixture that brings one up holds this lock while it is up, so a `make test` and a tier run by hand (or two
# worktrees' runs) take turns instead of breaking each other's node. A file of its own, not the one the
# Makefile's `flock` takes around `make test-nvidia`: a second open of that file in the child would wait on
# its own parent.
NODE_LOCK = Path(os.environ.get("DRA_MIGRATE_NODE_LOCK", "/tmp/dra-migrate-realnode-node.lock"))


@contextmanager
def real_node_lock() -> Iterator[None]:
    """Held while a real node is up; waits (saying so on stderr) while another process has one."""
    with open(NODE_LOCK, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for the real node: another process holds {NODE_LOCK}", file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cache_dir() -> Path:
    """Where tools/k8s/build puts the binaries (same defaults as the script)."""
    root = os.environ.get("DRA_MIGRATE_K8S_CACHE") or str(Path.home() / ".cache" / "dra-migrate" / "k8s")
    return Path(root) / f"v{K8S_VERSION}"


def binaries_present() -> bool:
    # build touches .complete last, so its presence means all four binaries were written.
    return (cache_dir() / ".complete").is_file()


def build(stream: bool = True, tail_lines: int = 40) -> None:
    """Run tools/k8s/build; echo its output to stderr if ``stream`` (a cold build takes minutes).

    Raises ControlPlaneError with the last ``tail_lines`` lines of output on failure.
    """
    tail: deque[str] = deque(maxlen=tail_lines)
    with subprocess.Popen(
        [str(TOOLS / "build")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line)
            if stream:
                sys.stderr.write(line)
                sys.stderr.flush()
    if proc.returncode != 0:
        raise ControlPlaneError(f"tools/k8s/build failed (exit {proc.returncode}); last lines:\n{''.join(tail)}")


def read_env(dir: Path) -> dict[str, str]:
    """Parse DIR/env (KEY=VALUE lines written by tools/k8s/up)."""
    env: dict[str, str] = {}
    for line in (dir / "env").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env[key] = value
    return env


def start(dir: Path, timeout: float = 600, env: dict[str, str] | None = None) -> ControlPlane:
    """Run ``tools/k8s/up DIR`` (it builds first if the binaries are missing) and describe the result.

    ``timeout`` bounds the whole call; up itself gives each component DRA_MIGRATE_K8S_TIMEOUT seconds.
    ``env`` adds to the environment up sees (DRA_MIGRATE_FEATURE_GATES, DRA_MIGRATE_RUNTIME_CONFIG).
    """
    try:
        res = subprocess.run(
            [str(TOOLS / "up"), str(dir)],
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        # up's EXIT trap does not run when it is killed; stop whatever it recorded.
        subprocess.run([str(TOOLS / "down"), str(dir)], check=False, capture_output=True)
        raise ControlPlaneError(f"tools/k8s/up {dir} did not finish within {timeout}s") from e
    if res.returncode != 0:
        raise ControlPlaneError(f"tools/k8s/up {dir} failed (exit {res.returncode}):\n{res.stderr}")
    kubeconfig = Path(res.stdout.strip().splitlines()[-1])
    env = read_env(dir)
    watchdog = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(TOOLS / "down"), str(dir)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C aimed at pytest must not take the watchdog down with it
    )
    return ControlPlane(dir=dir.resolve(), kubeconfig=kubeconfig, server=env["SERVER"], watchdog=watchdog)


def stop(cp: ControlPlane) -> None:
    """Run ``tools/k8s/down DIR``: stop the processes and delete the directory."""
    if cp.watchdog is not None:
        cp.watchdog.terminate()
        cp.watchdog.wait()
    res = subprocess.run([str(TOOLS / "down"), str(cp.dir)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise ControlPlaneError(f"tools/k8s/down {cp.dir} failed (exit {res.returncode}):\n{res.stderr}")


def _subject_component(value: str) -> str:
    # openssl -subj uses "/" as separator; a backslash escapes it (and itself).
    return value.replace("\\", "\\\\").replace("/", "\\/")


def mint_kubeconfig(cp: ControlPlane, user: str, groups: list[str], path: Path) -> Path:
    """Write a kubeconfig at ``path`` for ``user`` in ``groups``, authenticated by a client certificate.

    The apiserver maps the certificate's CN to the user name and each O to a group. Key and certificate
    are written next to ``path`` (``<path>.key``, ``<path>.crt``).
    """
    path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    key, crt = path.with_name(path.name + ".key"), path.with_name(path.name + ".crt")
    subject = "".join(f"/O={_subject_component(g)}" for g in groups) + f"/CN={_subject_component(user)}"
    # Scratch files next to the kubeconfig, not in /tmp: tests keep everything under their own dirs.
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        csr, ext = Path(tmp) / "req.csr", Path(tmp) / "req.ext"
        ext.write_text(
            "basicConstraints=critical,CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=clientAuth\n"
            "subjectKeyIdentifier=hash\n"
            "authorityKeyIdentifier=keyid,issuer\n"
        )
        steps = [
            ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", str(key)],
            ["openssl", "req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr)],
            [
                "openssl", "x509", "-req", "-in", str(csr),
                "-CA", str(cp.dir / "ca.crt"), "-CAkey", str(cp.dir / "ca.key"), "-CAcreateserial",
                "-CAserial", str(Path(tmp) / "ca.srl"),
                "-days", "30", "-extfile", str(ext), "-out", str(crt),
            ],
        ]  # fmt: skip
        for cmd in steps:
            res = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if res.returncode != 0:
                raise ControlPlaneError(f"{' '.join(cmd)} failed:\n{res.stderr}")
    key.chmod(0o600)
    # JSON is valid YAML, and json.dumps quotes arbitrary user names correctly.
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "dra-migrate-test",
                "cluster": {"server": cp.server, "certificate-authority": str(cp.dir / "ca.crt")},
            }
        ],
        "users": [{"name": user, "user": {"client-certificate": str(crt), "client-key": str(key)}}],
        "contexts": [{"name": "test", "context": {"cluster": "dra-migrate-test", "user": user}}],
        "current-context": "test",
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def audit_events(cp: ControlPlane, user_agent_prefix: str) -> list[dict[str, Any]]:
    """Audit events (one per completed request) whose ``userAgent`` starts with ``user_agent_prefix``.

    The apiserver appends to audit.log as requests complete, so a request made a moment ago may not be
    there yet; callers that count should poll briefly. A partially written last line is ignored.
    """
    path = cp.dir / "audit.log"
    if not path.exists():
        return []
    events: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict) and str(event.get("userAgent", "")).startswith(user_agent_prefix):
            events.append(event)
    return events
