"""Kubernetes resource quantities (k8s.io/apimachinery pkg/api/resource `Quantity`), read exactly.

Kept with the cluster model because snapshot validation needs it as much as the request rule does.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QTY_RE = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes resource.Quantity as a Decimal; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(str(value)) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    m = _QTY_RE.match(value.strip())
    if not m:
        return None
    try:
        number = Decimal(m.group(1) + (m.group(2) or ""))
    except InvalidOperation:
        return None
    return number * _SUFFIX[m.group(3) or ""]
