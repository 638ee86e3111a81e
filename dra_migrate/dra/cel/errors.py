"""What compiling or evaluating a selector can fail with."""

from __future__ import annotations

# resource.k8s.io/v1 CELSelectorExpressionMaxLength; validation compares Go's len(), i.e. bytes.
CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024
# resource.k8s.io/v1 CELSelectorExpressionMaxCost (k8s.io/api@v0.37.2 resource/v1/types.go): a selector whose
# estimated worst-case cost exceeds it is refused, Forbidden "too complex, exceeds cost limit"
# (k8s.io/kubernetes@v1.37.2 pkg/apis/resource/validation/validation.go validateCELSelector, from the
# MaxCost that staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go gets from cel.EstimateCost).
CEL_SELECTOR_EXPRESSION_MAX_COST = 1_000_000


class SelectorError(Exception):
    """The expression would be rejected by the API server (empty, too long, does not compile, not bool)."""


class UnsupportedSelectorError(SelectorError):
    """Valid for Kubernetes maybe, but uses CEL this offline evaluator does not implement."""


class SelectorEvaluationError(Exception):
    """The expression failed at runtime for a device; kube-scheduler then cannot allocate that claim."""
