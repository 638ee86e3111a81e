"""A class generated for a device-plugin `resources` pattern selects the devices the plugin's pattern matched.

k8s-device-plugin (v0.12.0 to v0.18.0, api/config/v1/resources.go) matches `pattern` against NVML's product
name (internal/rm/device_map.go: gpu.GetName(), or the MIG profile's String()) with
`regexp.MatchString(wildCardToRegexp(pattern), name)`: only `*` is a wildcard (`.*`), every other character is
literal (`regexp.QuoteMeta`), and the match is unanchored (a search). CEL's `matches` is RE2 search too.
"""

from __future__ import annotations

import pytest

from dra_migrate.dra.cel import compile_selector
from dra_migrate.dra.deviceclasses import _propose
from dra_migrate.inventory.model import Inventory

D = "gpu.nvidia.com"


def selects(pattern: str, product: str, group: str = "gpus") -> bool:
    inv = Inventory.__new__(Inventory)  # the custom-pattern branch of _propose reads no inventory
    proposal = _propose("nvidia.com/custom", inv, {"nvidia.com/custom": (group, pattern)})
    assert proposal is not None
    kind, field = ("gpu", "productName") if group == "gpus" else ("mig", "profile")
    device = {"name": "gpu-0", "attributes": {"type": {"string": kind}, field: {"string": product}}}
    return compile_selector(proposal.selector).matches(device, D)


@pytest.mark.parametrize(
    ("pattern", "product", "matched"),
    [
        ("A100", "NVIDIA A100-SXM4-40GB", True),  # unanchored, as regexp.MatchString
        ("*H100*", "NVIDIA H100 80GB HBM3", True),
        ("NVIDIA H100*", "NVIDIA H100 80GB HBM3", True),
        ("*", "Tesla T4", True),
        ("Tesla?T4", "Tesla T4", False),  # `?` is a literal question mark (QuoteMeta), not a wildcard
        ("Tesla?T4", "Tesla?T4", True),
        ("A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", False),
        ("H100 (PCIe)", "NVIDIA H100 (PCIe)", True),  # parentheses are literal
        ("H100.PCIe", "NVIDIA H100 PCIe", False),  # so is a dot
    ],
)
def test_a_product_pattern_selects_what_the_device_plugin_matched(pattern: str, product: str, matched: bool) -> None:
    assert selects(pattern, product) is matched


def test_a_mig_pattern_is_matched_against_the_profile() -> None:
    assert selects("1g.10gb", "1g.10gb+me", "mig") is True
    assert selects("1g.10gb*", "1g.10gb", "mig") is True
    assert selects("2g*", "1g.20gb", "mig") is False
