"""Quantity and Semver: the value types of the Kubernetes CEL quantity and semver libraries
(kubernetes staging/src/k8s.io/apiserver/pkg/cel/library/quantity.go, semverlib.go)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

# ---------------------------------------------------------------------------------------------------
# Quantity (k8s.io/apimachinery/pkg/api/resource, as wrapped by apiserver/pkg/cel/library/quantity.go)

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY_RE = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?")
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class Quantity:
    """A resource.Quantity by exact value; == and ordering are by value (80Gi == 81920Mi)."""

    value: Fraction
    text: str = ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)


def parse_quantity(text: str) -> Quantity:
    """resource.ParseQuantity: a signed decimal number with a binary (Ki..Ei), decimal (n..E) or
    exponent (e3) suffix. Values finer than 1n are rounded up (away from zero), as ParseQuantity does."""
    m = _QUANTITY_RE.fullmatch(text)
    if not m:
        raise ValueError("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    number, suffix = Fraction(m.group(1)), m.group(2) or ""
    if suffix in _BINARY:
        value = number * _BINARY[suffix]
    elif suffix in _DECIMAL:
        value = number * Fraction(10) ** _DECIMAL[suffix]
    else:
        value = number * Fraction(10) ** int(suffix[1:])
    nanos = value * 10**9
    if nanos.denominator != 1:
        rounded = math.ceil(abs(nanos))
        value = Fraction(rounded if nanos > 0 else -rounded, 10**9)
    return Quantity(value, text)


def _as_int64(q: Quantity) -> int | None:
    if q.value.denominator != 1 or not _INT64[0] <= q.value.numerator <= _INT64[1]:
        return None
    return q.value.numerator


# ---------------------------------------------------------------------------------------------------
# Semver (github.com/blang/semver/v4 as used by apiserver/pkg/cel/library/semverlib.go)

_NUM = r"0|[1-9][0-9]*"
_PRE_ID = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER_RE = re.compile(
    rf"({_NUM})\.({_NUM})\.({_NUM})(?:-({_PRE_ID}(?:\.{_PRE_ID})*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)


@dataclass(frozen=True)
class Semver:
    """A semantic version; equality and ordering follow semver precedence (build metadata ignored)."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: str = ""

    def _key(self) -> tuple[Any, ...]:
        # A release sorts after its pre-releases; numeric identifiers sort before alphanumeric ones.
        pre = tuple((0, int(p), "") if p.isdecimal() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def compare(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)


def parse_semver(text: str, normalize: bool = False) -> Semver:
    if normalize:
        text = _normalize_semver(text)
    m = _SEMVER_RE.fullmatch(text)
    if not m:
        raise ValueError(f"invalid semantic version: {text!r}")
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    return Semver(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, m.group(5) or "")


def _normalize_semver(text: str) -> str:
    # semverlib.go normalizeAndParse: drop a leading "v", leading zeros, fill missing minor/patch.
    parts = text.removeprefix("v").split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or not p[0].isdecimal():
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)
