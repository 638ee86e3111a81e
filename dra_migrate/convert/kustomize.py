"""Kustomize overlays: a patch is not a workload.

An overlay's patch that asks for GPUs (`resources.limits.nvidia.com/gpu: 4` in a strategic-merge patch of
a Deployment, or an RFC 6902 operation on `/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu`)
cannot be converted on its own. Converted as a workload, a strategic-merge patch would gain a
ResourceClaimTemplate "patch" no base defines (kustomize fails on it), and its pods would claim the overlay's
template name while the base's pods claim the base's. Left as it is, it merges `nvidia.com/gpu` back into
the converted base: the rendered pods ask for a claim and device-plugin GPUs both. So a file that a
kustomization of the same run names as a patch (`patches[].path`, `patchesStrategicMerge`,
`patchesJson6902[].path`: sigs.k8s.io/kustomize api/types/kustomization.go) and that asks for GPUs is a
problem, with what to do: write the patch by hand (its count belongs in the base's template), or convert
the rendered overlay (`kustomize build DIR | dra-migrate convert -`).

A patch is only known as one from a kustomization beside it in the run: convert the directory that holds
the overlays, not the base alone. A patch written inline in the kustomization (`patches[].patch`) is judged
the same way, in the kustomization itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from dra_migrate.cluster.yamlio import load_yaml_documents
from dra_migrate.convert.detect import gpu_keys_elsewhere
from dra_migrate.errors import InputError
from dra_migrate.inventory.resources import GpuNames

# kustomize's accepted file names (sigs.k8s.io/kustomize api/konfig/general.go RecognizedKustomizationFileNames).
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# A JSON pointer (RFC 6901: `/` in a key is written `~1`) to a container's device-plugin request.
_GPU_POINTER = re.compile(r"/resources/(?:limits|requests)/nvidia\.com~1(?:gpu|mig-)")


def patch_files(paths: Iterable[Path], read: Callable[[Path], list[Any]]) -> dict[Path, Path]:
    """Each file (resolved) that a kustomization among `paths` names as a patch -> that kustomization.
    `read(path)` gives a file's parsed documents."""
    found: dict[Path, Path] = {}
    for k in paths:
        if k.name not in KUSTOMIZATION_FILES:
            continue
        for doc in read(k):
            for name in _patch_paths(doc):
                found.setdefault((k.parent / name).resolve(), k)
    return found


def _patch_paths(doc: Any) -> Iterator[str]:
    if not isinstance(doc, dict):
        return
    for key in ("patches", "patchesJson6902"):
        for entry in _list(doc.get(key)):
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                yield entry["path"]
    for entry in _list(doc.get("patchesStrategicMerge")):
        if isinstance(entry, str) and "\n" not in entry.strip():  # a path; an inline patch spans lines
            yield entry.strip()


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def gpu_requests(doc: Any) -> list[str]:
    """Where a patch document asks for GPUs: paths in a strategic-merge patch, or RFC 6902 operations."""
    names = GpuNames()
    if not isinstance(doc, list):
        return list(gpu_keys_elsewhere(doc, names, set()))
    found = []
    for i, op in enumerate(doc):
        if not isinstance(op, dict):
            continue
        path = op.get("path")
        if isinstance(path, str) and _GPU_POINTER.search(path):
            found.append(f"[{i}] {op.get('op', '?')} {path}")
        found.extend(f"[{i}].value.{p}" for p in gpu_keys_elsewhere(op.get("value"), names, set()))
    return found


def patch_problem(where: str, kustomization: Path, asks: list[str]) -> str:
    return (
        f"{where}: a kustomize patch ({kustomization}) that asks for GPUs at {', '.join(asks)}: converted alone it "
        f"would claim a template its base does not define, and {_LEFT} or convert the rendered overlay: "
        f"kustomize build {kustomization.parent} | dra-migrate convert -"
    )


_LEFT = (
    "left as it is it asks for device-plugin GPUs again over the converted base; write it by hand (its count "
    "belongs in the base's ResourceClaimTemplate),"
)


def is_kustomization(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and doc.get("kind") in ("Kustomization", "Component")
        and str(doc.get("apiVersion", "")).startswith("kustomize.config.k8s.io/")
    )


def inline_patch_problems(doc: Any, kustomization: Path) -> list[str]:
    """What of a kustomization asks for GPUs (its inline patches, a chart's values); it is never converted."""
    asks = []
    for where, text in _inline_patches(doc):
        try:
            found = [a for d in load_yaml_documents(str(text), where) for a in gpu_requests(d)]
        except InputError:
            found = []
        if found or _GPU_POINTER.search(text):
            asks.append(f"{where} ({', '.join(found) or 'a JSON pointer to nvidia.com/'})")
    problems = []
    if asks:
        problems.append(
            f"an inline kustomize patch that asks for GPUs at {'; '.join(asks)}: {_LEFT} or convert the rendered "
            f"overlay: kustomize build {kustomization.parent} | dra-migrate convert -"
        )
    # Anything else of it that asks for GPUs: a Helm chart's values (`helmCharts[].valuesInline`).
    stray = [p for p in gpu_keys_elsewhere(doc, GpuNames(), set()) if not p.startswith(_PATCH_KEYS)]
    if stray:
        problems.append(
            f"a kustomization that asks for GPUs at {', '.join(stray)}: what it renders asks for device-plugin GPUs; "
            f"change it by hand, and convert the rendered overlay: kustomize build --enable-helm "
            f"{kustomization.parent} | dra-migrate convert -"
        )
    return problems


_PATCH_KEYS = ("patches", "patchesJson6902", "patchesStrategicMerge")


def _inline_patches(doc: Any) -> Iterator[tuple[str, str]]:
    for key in ("patches", "patchesJson6902"):
        for i, entry in enumerate(_list(doc.get(key))):
            if isinstance(entry, dict) and isinstance(entry.get("patch"), str):
                yield f"{key}[{i}].patch", entry["patch"]
    for i, entry in enumerate(_list(doc.get("patchesStrategicMerge"))):
        if isinstance(entry, str) and "\n" in entry.strip():
            yield f"patchesStrategicMerge[{i}]", entry
