"""Which held lock a new run takes over at once: only its own machine's crashed run (`session.crashed_here`).

Found reading the takeover: it compared hostnames only. Two operators applying one committed plan from two
laptops with the default hostname `MacBook-Pro` (or two machines called `localhost`): the second found the
first's live Lease, saw "this host" and a pid it could not find (another machine's), took it for its own
crashed run and broke the lock in use. The Lease now names its machine (`lock.machine_id`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from dra_migrate.execute import lock as lock_module
from dra_migrate.execute.lock import MACHINE_ANNOTATION, LockInfo, _digest_of_machine, _info, machine_id
from dra_migrate.execute.session import crashed_here


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _held(holder: str, machine: str) -> LockInfo:
    return LockInfo(
        namespace="kube-system",
        name="dra-migrate",
        holder=holder,
        plan_digest="sha256:x",
        lock_id=holder.rsplit("/", 1)[1],
        renewed=datetime.now(UTC),
        duration_s=60,
        uid="u",
        resource_version="1",
        machine=machine,
    )


HERE = socket.gethostname()


def test_this_machines_crashed_run_is_taken_over() -> None:
    assert machine_id(), "this test machine has a machine id or a hardware address"
    assert crashed_here(_held(f"ops@{HERE}/{_dead_pid()}/0123456789abcdef", machine_id()))


@pytest.mark.parametrize(
    "why",
    ["another machine of the same hostname", "a lock that does not name its machine", "a live process"],
)
def test_anything_else_is_not_taken_for_our_crashed_run(why: str) -> None:
    dead = f"ops@{HERE}/{_dead_pid()}/0123456789abcdef"
    info = {
        "another machine of the same hostname": _held(dead, _digest_of_machine("another-installation", 0)),
        "a lock that does not name its machine": _held(dead, ""),
        "a live process": _held(f"ops@{HERE}/{os.getppid()}/0123456789abcdef", machine_id()),
    }[why]
    assert not crashed_here(info), why


def test_the_lease_names_the_machine_its_holder_runs_on() -> None:
    lock = lock_module.ClusterLock(None, plan_digest="sha256:x")
    manifest = lock._manifest(datetime.now(UTC))
    assert manifest["metadata"]["annotations"][MACHINE_ANNOTATION] == machine_id()
    assert _info(manifest, "kube-system", "dra-migrate").machine == machine_id()


def test_a_machine_is_named_by_its_machine_id_else_a_real_hardware_address() -> None:
    a, b = _digest_of_machine("4f1c0e9a", 0), _digest_of_machine("77aa10b2", 0)
    assert a != b and a == _digest_of_machine("4f1c0e9a", 0x0242AC110002)  # the machine-id wins
    assert "4f1c0e9a" not in a  # the id itself is not published in the Lease
    assert _digest_of_machine("", 0x0242AC110002) != ""  # a hardware address (no machine-id: macOS)
    assert _digest_of_machine("", 0x0242AC110002 | 1 << 40) == ""  # multicast bit: made up by uuid.getnode()


def test_a_container_restarted_in_its_pod_takes_over_its_previous_run() -> None:
    """In a container the runner is PID 1 in every incarnation: the holder's pid is alive (it is ours now),
    yet the holder is a previous run (another lock id), whose Lease would otherwise be waited out."""
    assert crashed_here(_held(f"ops@{HERE}/{os.getpid()}/fedcba9876543210", machine_id()))


def test_a_lock_this_process_holds_is_never_its_crashed_run() -> None:
    """Two applies in one process (a program embedding the CLI): the pid is ours and alive, and so is its run."""
    lock_module.HELD_HERE.add("fedcba9876543210")
    try:
        assert not crashed_here(_held(f"ops@{HERE}/{os.getpid()}/fedcba9876543210", machine_id()))
    finally:
        lock_module.HELD_HERE.discard("fedcba9876543210")
