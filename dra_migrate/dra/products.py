"""What dra-migrate knows of NVIDIA GPU models and their MIG profiles: the NVML product names behind GFD's
product labels, each family's compute capability, and each MIG profile's geometry (GPU-instance profile ID,
memory slices, valid placements, memory, SMs and engines). `devices` predicts a node's DRA devices with it.

Split from `devices` (issue 24): the tables and the profile arithmetic are data; `devices` is the layout and the
devices built from it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal

LABEL_PRODUCT = "nvidia.com/gpu.product"


# ---------------------------------------------------------------------------------------------------
# GPU models


@dataclass(frozen=True)
class Product:
    name: str  # as NVML reports it: the DRA driver's productName
    family: str  # GFD's gpu.family
    compute: tuple[int, int]
    mig_table: str | None = None  # key of _MIG_TABLES


# GFD writes the NVML name with spaces turned into hyphens (nvidia-facts.md §3), which loses the
# hyphens NVML had; the products we know are mapped back exactly, the rest get spaces.
_PRODUCTS: dict[str, Product] = {
    "NVIDIA-H100-80GB-HBM3": Product("NVIDIA H100 80GB HBM3", "hopper", (9, 0), "H100-80GB"),
    "NVIDIA-H100-PCIe": Product("NVIDIA H100 PCIe", "hopper", (9, 0), "H100-80GB"),
    "NVIDIA-H200": Product("NVIDIA H200", "hopper", (9, 0), "H200-141GB"),
    "NVIDIA-H200-141GB-HBM3e": Product("NVIDIA H200 141GB HBM3e", "hopper", (9, 0), "H200-141GB"),
    "NVIDIA-B200": Product("NVIDIA B200", "blackwell", (10, 0), "B200-180GB"),
    "NVIDIA-B200-180GB-HBM3e": Product("NVIDIA B200 180GB HBM3e", "blackwell", (10, 0), "B200-180GB"),
    "NVIDIA-GB200": Product("NVIDIA GB200", "blackwell", (10, 0)),
    "NVIDIA-A100-SXM4-80GB": Product("NVIDIA A100-SXM4-80GB", "ampere", (8, 0), "A100-80GB"),
    "NVIDIA-A100-80GB-PCIe": Product("NVIDIA A100 80GB PCIe", "ampere", (8, 0), "A100-80GB"),
    "NVIDIA-A100-SXM4-40GB": Product("NVIDIA A100-SXM4-40GB", "ampere", (8, 0), "A100-40GB"),
    "NVIDIA-A100-PCIE-40GB": Product("NVIDIA A100-PCIE-40GB", "ampere", (8, 0), "A100-40GB"),
    "NVIDIA-A10": Product("NVIDIA A10", "ampere", (8, 6)),
    "NVIDIA-A10G": Product("NVIDIA A10G", "ampere", (8, 6)),
    "NVIDIA-L4": Product("NVIDIA L4", "ada-lovelace", (8, 9)),
    "Tesla-T4": Product("Tesla T4", "turing", (7, 5)),
}
FAMILY_COMPUTE = {
    "pascal": (6, 0),
    "volta": (7, 0),
    "turing": (7, 5),
    "ampere": (8, 0),
    "ada-lovelace": (8, 9),
    "hopper": (9, 0),
    "blackwell": (10, 0),
}


def base_product(gfd_product: str) -> str:
    """GFD's product label without the -SHARED and -MIG-<profile> suffixes it may append."""
    p = gfd_product.removesuffix("-SHARED")
    return p.split("-MIG-", 1)[0]


def known_product(gfd_product: str) -> Product | None:
    """What we know of a GFD product label (suffixes ignored), or None."""
    return _PRODUCTS.get(base_product(gfd_product))


# NVML names data-centre boards either with spaces (`NVIDIA H100 80GB HBM3`) or as one hyphenated
# `<model>-<form factor>-<memory>` word (`NVIDIA A100-SXM4-40GB`, `NVIDIA A30-PCIE-24GB`, `Tesla V100-SXM2-16GB`:
# go-nvml v0.13.4-1 pkg/nvml/mock/gpus/a100.go, a30.go); GFD writes both with hyphens only
# (k8s-device-plugin v0.18.0 internal/lm/resource.go sanitise). Such a word keeps its hyphens.
_HYPHENATED_BOARD = re.compile(r"(?<![^-])([A-Z]+\d+[A-Za-z]*)-(SXM\d*|PCIE)-(\d+GB)(?![^-])")


def product_name(gfd_product: str) -> str:
    """`NVIDIA-H100-80GB-HBM3` -> `NVIDIA H100 80GB HBM3` (the DRA driver's productName). A product not in our
    table gets spaces back, except inside a `<model>-<form factor>-<memory>` board name
    (`NVIDIA-A30-PCIE-24GB` -> `NVIDIA A30-PCIE-24GB`)."""
    base = base_product(gfd_product)
    known = _PRODUCTS.get(base)
    if known:
        return known.name
    kept = _HYPHENATED_BOARD.sub(lambda m: "\0".join(m.groups()), base)
    return kept.replace("-", " ").replace("\0", "-")


def architecture(family: str) -> str:
    """GFD's family (`ada-lovelace`) as the DRA driver's architecture attribute (`Ada Lovelace`)."""
    return " ".join(w.capitalize() for w in family.split("-"))


# ---------------------------------------------------------------------------------------------------
# MIG profiles


@dataclass(frozen=True)
class MigProfile:
    gi_profile_id: int  # NVML GPU-instance profile ID: the second-to-last part of a DRA MIG device name
    size: int  # memory slices (of 8) it occupies
    starts: tuple[int, ...]  # valid placement starts
    memory_mib: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int = 0
    jpeg_engines: int = 0
    ofa_engines: int = 0


_ALL_1G = (0, 1, 2, 3, 4, 5, 6)
_EVEN = (0, 2, 4, 6)

# From NVIDIA's MIG User Guide, "Supported MIG Profiles" and the `nvidia-smi mig -lgip` listings in
# "Getting Started with MIG" (docs.nvidia.com/datacenter/tesla/mig-user-guide/). Memory is the listed GiB
# times 1024; placements are in memory slices of 8. Names, IDs and sizes are exact; memory, SMs and
# engines are as close as the guide's rounded figures allow, and GFD's labels, where a node has them, win.
_MIG_TABLES: dict[str, dict[str, MigProfile]] = {
    "A100-40GB": {
        "1g.5gb": MigProfile(19, 1, _ALL_1G, 4864, 14, 1, 0),
        "1g.5gb+me": MigProfile(20, 1, _ALL_1G, 4864, 14, 1, 1, 0, 1, 1),
        "1g.10gb": MigProfile(15, 2, _EVEN, 9856, 14, 1, 1),
        "2g.10gb": MigProfile(14, 2, (0, 2, 4), 9856, 28, 2, 1),
        "3g.20gb": MigProfile(9, 4, (0, 4), 19968, 42, 3, 2),
        "4g.20gb": MigProfile(5, 4, (0,), 19968, 56, 4, 2),
        "7g.40gb": MigProfile(0, 8, (0,), 40320, 98, 7, 5, 0, 1, 1),
    },
    "A100-80GB": {
        "1g.10gb": MigProfile(19, 1, _ALL_1G, 9728, 14, 1, 0),
        "1g.10gb+me": MigProfile(20, 1, _ALL_1G, 9728, 14, 1, 1, 0, 1, 1),
        "1g.20gb": MigProfile(15, 2, _EVEN, 19968, 14, 1, 1),
        "2g.20gb": MigProfile(14, 2, (0, 2, 4), 19968, 28, 2, 1),
        "3g.40gb": MigProfile(9, 4, (0, 4), 40192, 42, 3, 2),
        "4g.40gb": MigProfile(5, 4, (0,), 40192, 56, 4, 2),
        "7g.80gb": MigProfile(0, 8, (0,), 80640, 98, 7, 5, 0, 1, 1),
    },
    "H100-80GB": {
        "1g.10gb": MigProfile(19, 1, _ALL_1G, 9984, 16, 1, 1, 0, 1, 0),
        "1g.10gb+me": MigProfile(20, 1, _ALL_1G, 9984, 16, 1, 1, 0, 1, 1),
        "1g.20gb": MigProfile(15, 2, _EVEN, 20096, 26, 1, 1, 0, 1, 0),
        "2g.20gb": MigProfile(14, 2, (0, 2, 4), 20096, 32, 2, 2, 0, 2, 0),
        "3g.40gb": MigProfile(9, 4, (0, 4), 40448, 60, 3, 3, 0, 3, 0),
        "4g.40gb": MigProfile(5, 4, (0,), 40448, 64, 4, 4, 0, 4, 0),
        "7g.80gb": MigProfile(0, 8, (0,), 81152, 132, 8, 7, 0, 7, 1),
    },
}

# H200 and B200: memory (MemorySizeMB, in MiB), multiprocessors and engines of each GPU-instance profile
# from NVIDIA/go-nvml v0.13.4-1 pkg/nvml/mock/gpus/h200.go (H200_SXM5_141GB, used by mock/dgxh200) and
# b200.go (B200_SXM5_180GB, used by mock/dgxb200). The mocks list profiles by NVML enum
# (GPU_INSTANCE_PROFILE_1_SLICE, _1_SLICE_REV1 = +me, _1_SLICE_REV2 = double memory, ...) and do not give
# the profile IDs NVML returns nor memory-slice sizes that match the hardware (their 3g/7g placements have
# size 3/7); the IDs (19, 20, 15, 14, 9, 5, 0) and 8-slice geometry are Hopper's, as in the table above.
# GB200: no upstream table was found (go-nvml has no GB200 mock; NVIDIA/k8s-test-infra
# pkg/gpu/mocknvml/configs/mock-nvml-config-gb200.yaml gives `mig.max_gpu_instances: 7` only), so its
# profiles are derived from their names, with GFD's per-profile labels for memory and engines.
_MIG_TABLES["H200-141GB"] = {
    "1g.18gb": MigProfile(19, 1, _ALL_1G, 18432, 16, 1, 1, 0, 0, 0),
    "1g.18gb+me": MigProfile(20, 1, _ALL_1G, 18432, 16, 1, 1, 0, 1, 1),
    "1g.35gb": MigProfile(15, 2, _EVEN, 35840, 16, 1, 1, 0, 0, 0),
    "2g.35gb": MigProfile(14, 2, (0, 2, 4), 35840, 32, 2, 1, 0, 0, 0),
    "3g.71gb": MigProfile(9, 4, (0, 4), 72704, 48, 3, 2, 0, 0, 0),
    "4g.71gb": MigProfile(5, 4, (0,), 72704, 64, 4, 2, 0, 0, 0),
    "7g.141gb": MigProfile(0, 8, (0,), 144384, 112, 7, 5, 0, 0, 0),
}
_MIG_TABLES["B200-180GB"] = {
    "1g.23gb": MigProfile(19, 1, _ALL_1G, 23552, 18, 1, 1, 0, 0, 0),
    "1g.23gb+me": MigProfile(20, 1, _ALL_1G, 23552, 18, 1, 1, 1, 1, 1),
    "1g.45gb": MigProfile(15, 2, _EVEN, 46080, 18, 1, 1, 0, 0, 0),
    "2g.45gb": MigProfile(14, 2, (0, 2, 4), 46080, 36, 2, 2, 1, 1, 1),
    "3g.90gb": MigProfile(9, 4, (0, 4), 92160, 54, 3, 3, 2, 2, 2),
    "4g.90gb": MigProfile(5, 4, (0,), 92160, 72, 4, 4, 2, 2, 2),
    "7g.180gb": MigProfile(0, 8, (0,), 184320, 126, 7, 7, 4, 4, 4),
}

# For profiles not in a table: what the compute-slice count implies (the same on A100 and H100).
_GI_ID_BY_COMPUTE = {1: 19, 2: 14, 3: 9, 4: 5, 7: 0}
_SIZE_BY_COMPUTE = {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}
# Profile names as go-nvlib writes them: <c>g.<m>gb plus an attribute suffix: `+me` (one media-extension
# set), and on Blackwell `+me.all`, `-me` (no media engines) and `+gfx` (graphics)
# (NVIDIA/go-nvlib pkg/nvlib/device/mig_profile.go attribute names; MIG user guide, Blackwell profiles).
PROFILE_RE = re.compile(r"^(\d+)g\.(\d+)gb(\+me\.all|\+me|-me|\+gfx)?$")
# The device plugin and GFD write `+` as `.` in resource and label names (`1g.23gb.me.all`).
_RESOURCE_SUFFIXES = ((".me.all", "+me.all"), (".me", "+me"), (".gfx", "+gfx"))


def mig_table(labels: Mapping[str, str]) -> dict[str, MigProfile]:
    base = base_product(labels.get(LABEL_PRODUCT, ""))
    known = _PRODUCTS.get(base)
    if known and known.mig_table:
        return _MIG_TABLES[known.mig_table]
    if "A100" in base:
        return _MIG_TABLES["A100-80GB" if "80GB" in base else "A100-40GB"]
    if "H100" in base:
        return _MIG_TABLES["H100-80GB"]
    if "H200" in base:
        return _MIG_TABLES["H200-141GB"]
    if "B200" in base and "GB200" not in base:
        return _MIG_TABLES["B200-180GB"]
    return {}


def mig_capable(gfd_product: str) -> bool:
    """Whether we know the product's MIG profiles."""
    return bool(mig_table({LABEL_PRODUCT: gfd_product}))


def single_profile(gfd_product: str) -> str | None:
    """The MIG profile GFD appends to the product under the single strategy (`...-MIG-1g.10gb[-SHARED]`)."""
    p = gfd_product.removesuffix("-SHARED")
    return p.split("-MIG-", 1)[1] if "-MIG-" in p else None


def mig_memory_gb(memory_mib: int, total_mib: int) -> int:
    """The `<m>gb` of a MIG profile name as go-nvlib derives it from memory (NVIDIA/go-nvlib pkg/nvlib/device/
    mig_profile.go getMigMemorySizeGB): the instance's share of the GPU's memory rounded up to eighths, times
    the GPU's memory in whole GiB rounded up, rounded half away from zero."""
    share = math.ceil(memory_mib / total_mib * 8) / 8
    return int(Decimal(share * -(-total_mib // 1024)).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _profile_label(profile: str, labels: Mapping[str, str], key: str) -> int | None:
    if single_profile(labels.get(LABEL_PRODUCT, "")) == profile:
        value = labels.get(f"nvidia.com/gpu.{key}")
    else:
        value = labels.get(f"nvidia.com/mig-{resource_profile(profile)}.{key}")
    return int(value) if value is not None and value.isdecimal() else None


def _table_entry(profile: str, labels: Mapping[str, str]) -> MigProfile | None:
    """The table's geometry for `profile`, unless GFD's memory label for it says the name means another
    profile here: names follow memory (`mig_memory_gb`), so where a GPU's memory split differs from the board
    the table describes, the same name can be another instance size (go-nvml's H200 mock names its 1-slice
    instance, 18432 MiB of 144384, `1g.35gb`: the table's 2-slice `1g.35gb`)."""
    geo = mig_table(labels).get(profile)
    memory = _profile_label(profile, labels, "memory")
    if geo is not None and memory is not None and abs(memory - geo.memory_mib) > geo.memory_mib // 10:
        return None
    return geo


def mig_profile(profile: str, labels: Mapping[str, str]) -> MigProfile:
    """The profile's geometry: from the table, else from its name and memory; GFD's labels for the profile,
    where the node has them, give its memory, SMs and engines (`nvidia.com/mig-<p>.*` under the mixed
    strategy, `nvidia.com/gpu.*` under single)."""
    geo = _table_entry(profile, labels)
    if geo is None:
        m = PROFILE_RE.match(profile)
        if not m:
            raise ValueError(f"not a MIG profile name: {profile!r}")
        compute, mem_gb, media = int(m.group(1)), int(m.group(2)), m.group(3)
        # Only `+me` has a known ID of its own (20); the Blackwell variants' IDs are not in any source we
        # read, so they take the base profile's, and their names are a prediction.
        gi = 20 if media == "+me" and compute == 1 else _GI_ID_BY_COMPUTE.get(compute, 0)
        size = _SIZE_BY_COMPUTE.get(compute, 8)
        starts = _ALL_1G if size == 1 else tuple(range(0, 8 - size + 1, size))
        geo = MigProfile(
            gi, size, starts, memory_mib=mem_gb * 1024, multiprocessors=0, copy_engines=compute, decoders=0
        )
    if single_profile(labels.get(LABEL_PRODUCT, "")) == profile:
        prefix = "nvidia.com/gpu."
    else:
        prefix = f"nvidia.com/mig-{resource_profile(profile)}."

    def label(key: str, default: int) -> int:
        value = labels.get(prefix + key)
        return int(value) if value is not None and value.isdecimal() else default

    return replace(
        geo,
        memory_mib=label("memory", geo.memory_mib),
        multiprocessors=label("multiprocessors", geo.multiprocessors),
        copy_engines=label("engines.copy", geo.copy_engines),
        decoders=label("engines.decoder", geo.decoders),
        encoders=label("engines.encoder", geo.encoders),
        jpeg_engines=label("engines.jpeg", geo.jpeg_engines),
        ofa_engines=label("engines.ofa", geo.ofa_engines),
    )


def resource_profile(profile: str) -> str:
    """The profile as the device plugin writes it in resource names and GFD in labels: `+` as `.`
    (nvidia-facts.md §2)."""
    return profile.replace("+", ".")


def profile_from_resource(name: str) -> str:
    for written, profile_suffix in _RESOURCE_SUFFIXES:
        if name.endswith(written):
            return name[: -len(written)] + profile_suffix
    return name


def mig_device_name(parent_index: int, profile: str, gi_profile_id: int, start: int) -> str:
    """The DRA driver's canonical MIG device name: the profile without dots, lower-cased, anything
    outside [a-z0-9-] as `-` (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/mig.go, v0.4.1):
    `1g.10gb+me` -> `1g10gb-me`, `1g.23gb+me.all` -> `1g23gb-meall`, `1g.23gb-me` -> `1g23gb-me`."""
    p = re.sub(r"[^a-z0-9-]", "-", profile.replace(".", "").lower())
    return f"gpu-{parent_index}-mig-{p}-{gi_profile_id}-{start}"
