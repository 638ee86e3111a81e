"""CEL engines for DRA selectors, measured on the conformance cases and on speed (issue 14 item 4).

Engines: dra_migrate.dra.cel (cel-python plus this project's checker, Kubernetes libraries and cel-go
semantics), and the bare PyPI engines `cel-python` (celpy), `common-expression-language` (import `cel`,
Rust) and `cel-expr-python` (Google's cel-cpp bindings). The bare engines get the device as a plain map
(`device.driver`, `device.attributes[domain][name]`, ...) and no Kubernetes library; their verdict is
true/false, rejected (does not compile) or error. Those not installed are skipped, so run it in an
environment that has them:

    python -m venv --system-site-packages ~/.cache/dra-migrate/celbench-venv
    ~/.cache/dra-migrate/celbench-venv/bin/pip install cel-expr-python==0.1.3 common-expression-language==0.10.0
    PYTHONPATH=$PWD ~/.cache/dra-migrate/celbench-venv/bin/python bench/cel.py [--nodes 10000]

Speed: 2,000 nodes x 8 devices x 3 classes (the NVIDIA chart's gpu class, a MIG-profile class and a
product-name pattern), each device evaluated against each class: 48,000 evaluations, compiled once.
"""

from __future__ import annotations

import collections
import importlib
import json
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# This file is bench/cel.py: keep its directory off the path so `import cel` finds the Rust engine.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from tests.conformance.verdicts import load, outcome, verdict  # noqa: E402

DRIVER = "gpu.nvidia.com"
CLASSES = [
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
    " && device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    " && device.attributes['gpu.nvidia.com'].productName.matches('^NVIDIA H100.*$')",
]


def fleet(nodes: int = 2000, per_node: int = 8) -> list[dict[str, Any]]:
    products = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "Tesla T4"]
    out = []
    for n in range(nodes):
        for i in range(per_node):
            mig = n % 5 == 0 and i >= 4
            attrs: dict[str, Any] = {
                "type": {"string": "mig" if mig else "gpu"},
                "productName": {"string": products[n % 3]},
                "uuid": {"string": f"GPU-{n:05d}-{i}"},
                "index": {"int": i},
                "driverVersion": {"version": "580.95.5"},
            }
            if mig:
                attrs["profile"] = {"string": "1g.10gb"}
            out.append({"name": f"gpu-{i}", "attributes": attrs, "capacity": {"memory": {"value": "80Gi"}}})
    return out


def plain_device(device: dict[str, Any]) -> dict[str, Any]:
    """The device as a plain map for the bare engines (values only; versions and quantities as strings)."""
    driver = str(device.get("driver") or DRIVER)
    attrs: dict[str, dict[str, Any]] = {}
    for name, attr in (device.get("attributes") or {}).items():
        domain, _, ident = name.rpartition("/")
        value = next(iter(attr.values()), None) if isinstance(attr, dict) and attr else None
        attrs.setdefault(domain or driver, {})[ident] = value
    caps: dict[str, dict[str, Any]] = {}
    for name, cap in (device.get("capacity") or {}).items():
        domain, _, ident = name.rpartition("/")
        caps.setdefault(domain or driver, {})[ident] = (cap or {}).get("value")
    return {
        "driver": driver,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations")),
        "attributes": attrs,
        "capacity": caps,
    }


# ---------------------------------------------------------------------------------------------------
# Engines: name -> compile(expression) -> evaluate(plain device) -> Python value (raises on error)

Compiled = Callable[[dict[str, Any]], Any]


def _celpy() -> Callable[[str], Compiled] | None:
    try:
        celpy = importlib.import_module("celpy")
    except ImportError:
        return None
    env = celpy.Environment()

    def compile_(expression: str) -> Compiled:
        program = env.program(env.compile(expression))

        def run(device: dict[str, Any]) -> Any:
            result = program.evaluate({"device": celpy.json_to_cel(device)})
            if isinstance(result, Exception):
                raise result
            return result

        return run

    return compile_


def _rust() -> Callable[[str], Compiled] | None:
    try:
        cel = importlib.import_module("cel")
        if not hasattr(cel, "compile"):
            return None
    except ImportError:
        return None

    def compile_(expression: str) -> Compiled:
        program = cel.compile(expression)
        return lambda device: program.execute({"device": device})

    return compile_


def _cpp() -> Callable[[str], Compiled] | None:
    try:
        cel = importlib.import_module("cel_expr_python.cel")
        strings = importlib.import_module("cel_expr_python.ext.ext_strings")
        bindings = importlib.import_module("cel_expr_python.ext.ext_bindings")
    except ImportError:
        return None
    env = cel.NewEnv(
        variables={"device": cel.Type.DYN},
        extensions=[strings.ExtStrings(), bindings.ExtBindings()],
    )

    def compile_(expression: str) -> Compiled:
        program = env.compile(expression)

        def run(device: dict[str, Any]) -> Any:
            value = program.eval(data={"device": device})
            if value.type() == cel.Type.ERROR:
                raise RuntimeError(str(value.value()))
            return value.value()

        return run

    return compile_


def bare_verdict(compile_: Callable[[str], Compiled], expression: str, device: dict[str, Any]) -> str:
    try:
        program = compile_(expression)
    except Exception:
        return "rejected"
    try:
        result = program(plain_device(device))
    except Exception:
        return "error"
    if result is True or result is False:
        return "true" if result else "false"
    return "true" if str(result) == "True" else "false" if str(result) == "False" else "error"


def conformance(engines: dict[str, Callable[[str], Compiled]]) -> dict[str, collections.Counter[str]]:
    cases = load()
    out: dict[str, collections.Counter[str]] = {"dra_migrate.dra.cel": collections.Counter()}
    for c, a in cases:
        out["dra_migrate.dra.cel"][outcome(verdict(c["expression"], c["device"]), a["verdict"])] += 1
    for name in engines:
        counts: collections.Counter[str] = collections.Counter()
        for ours, (_, a) in zip(_isolated_verdicts(name, len(cases)), cases, strict=True):
            counts["crashed or hung" if ours == "crash" else outcome(ours, a["verdict"])] += 1
        out[name] = counts
    return out


def _isolated_verdicts(engine: str, total: int) -> list[str]:
    """Verdicts from a worker process (2 GiB of memory, 5 s per case); a case that kills it is "crash"."""
    out: list[str] = []
    while len(out) < total:
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", engine, str(len(out))], capture_output=True, text=True
        )
        got = proc.stdout.split()
        out += got
        if proc.returncode != 0 and len(out) < total:
            out.append("crash")
    return out[:total]


def _worker(engine: str, start: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    compile_ = ENGINES[engine]()
    assert compile_ is not None
    for c, _ in load()[start:]:
        signal.alarm(5)
        print(bare_verdict(compile_, c["expression"], c["device"]), flush=True)
    signal.alarm(0)


def speed(engines: dict[str, Callable[[str], Compiled]], nodes: int = 2000) -> dict[str, float]:
    devices = fleet(nodes)
    out: dict[str, float] = {}
    from dra_migrate.dra.cel import compile_selector

    selectors = [compile_selector(e) for e in CLASSES]
    start = time.perf_counter()
    for s in selectors:
        for d in devices:
            s.matches(d, DRIVER)
    out["dra_migrate.dra.cel"] = time.perf_counter() - start
    # The same evaluator without its per-attribute-set cache: every device evaluated.
    from dra_migrate.dra.cel import Selector

    start = time.perf_counter()
    for s in selectors:
        for d in devices[:2000]:
            Selector._evaluate(s, d["attributes"], d["capacity"], DRIVER)
    out["dra_migrate.dra.cel (uncached, extrapolated)"] = (time.perf_counter() - start) * len(devices) / 2000
    plain = [plain_device(d) for d in devices]
    for name, compile_ in engines.items():
        programs = [compile_(e.replace("'^NVIDIA H100.*$'", "'^NVIDIA H100.*$'")) for e in CLASSES]
        start = time.perf_counter()
        sample = plain if name != "cel-python (bare)" else plain[:2000]
        for p in programs:
            for d in sample:
                try:
                    p(d)
                except Exception:
                    continue
        elapsed = time.perf_counter() - start
        out[name] = elapsed * len(plain) / len(sample)
    return out


ENGINES = {"cel-python (bare)": _celpy, "common-expression-language": _rust, "cel-expr-python": _cpp}


def main() -> int:
    if sys.argv[1:2] == ["--worker"]:
        _worker(sys.argv[2], int(sys.argv[3]))
        return 0
    candidates = {name: factory() for name, factory in ENGINES.items()}
    engines = {k: v for k, v in candidates.items() if v is not None}
    skipped = [k for k, v in candidates.items() if v is None]
    nodes = int(sys.argv[sys.argv.index("--nodes") + 1]) if "--nodes" in sys.argv else 2000
    conf = conformance(engines)
    secs = speed(engines, nodes)
    evaluations = len(CLASSES) * nodes * 8
    report = {
        "nodes": nodes,
        "evaluations": evaluations,
        "skipped": skipped,
        "conformance": {k: dict(v) for k, v in conf.items()},
        "seconds": {k: round(v, 3) for k, v in secs.items()},
        "evaluations_per_second": {k: round(evaluations / v) for k, v in secs.items() if v > 0},
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
