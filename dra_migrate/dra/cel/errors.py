"""What compiling or evaluating a selector can fail with."""

from __future__ import annotations

# resource.k8s.io/v1 CELSelectorExpressionMaxLength; validation compares Go's len(), i.e. bytes.
CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024


class SelectorError(Exception):
    """The expression would be rejected by the API server (empty, too long, does not compile, not bool)."""


class UnsupportedSelectorError(SelectorError):
    """Valid for Kubernetes maybe, but uses CEL this offline evaluator does not implement."""


class SelectorEvaluationError(Exception):
    """The expression failed at runtime for a device; kube-scheduler then cannot allocate that claim."""
