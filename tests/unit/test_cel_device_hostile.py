"""A device of any shape (a snapshot's ResourceSlice is user input) is matched or is that device's
evaluation error (SelectorEvaluationError, counted by `match`), never an internal error; a value of the
wrong JSON type is an error, not read as another type (found by fuzzing selector evaluation with atheris)."""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.dra.cel import SelectorEvaluationError, compile_selector, matches_all

TYPE_IS_GPU = 'device.attributes["gpu.nvidia.com"].type == "gpu"'
MEMORY = 'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("1Gi"))'
X_IS_ONE = "device.attributes['gpu.nvidia.com'].x == 1"


@pytest.mark.parametrize(
    ("expression", "device"),
    [
        (TYPE_IS_GPU, {"attributes": ["type"]}),  # _key read it with .get: AttributeError
        (TYPE_IS_GPU, {"attributes": "type"}),
        (TYPE_IS_GPU, {"attributes": {"type": "gpu"}}),
        (TYPE_IS_GPU, {"attributes": {"type": {"string": "gpu"}}, "capacity": [1]}),
        (MEMORY, {"capacity": {"memory": "80Gi"}}),
        (TYPE_IS_GPU, {"attributes": {"type": {"strings": 5}}}),
        (X_IS_ONE, {"attributes": {"x": {"int": "1"}}}),  # a string is not an int (was int("1"))
        (X_IS_ONE, {"attributes": {"x": {"int": 2**64}}}),  # beyond int64
        (X_IS_ONE, {"attributes": {"x": {"int": True}}}),
        ("device.attributes['gpu.nvidia.com'].x", {"attributes": {"x": {"bool": "false"}}}),  # was bool("false")
        ("device.attributes['gpu.nvidia.com'].x == 'a'", {"attributes": {"x": {"string": ["a"]}}}),
        ("device.attributes['gpu.nvidia.com'].x.isGreaterThan(semver('1.0.0'))", {"attributes": {"x": {"version": 2}}}),
        ("size(device.attributes['gpu.nvidia.com'].x) == 1", {"attributes": {"x": {"versions": ["1.0.0", {}]}}}),
    ],
)
def test_a_device_of_the_wrong_shape_is_its_evaluation_error(expression: str, device: dict[str, Any]) -> None:
    selector = compile_selector(expression)
    with pytest.raises(SelectorEvaluationError):
        selector.matches(device, "gpu.nvidia.com")
    assert matches_all([selector], device, "gpu.nvidia.com") is False


def test_well_typed_values_of_every_form_still_read() -> None:
    device = {
        "attributes": {
            "i": {"int": 3}, "b": {"bool": True}, "s": {"string": "a"}, "v": {"version": "1.2.3"},
            "is": {"ints": [1, 2]}, "bs": {"bools": [False]}, "ss": {"strings": ["x"]}, "vs": {"versions": ["2.0.0"]},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }  # fmt: skip
    expression = (
        "device.attributes['gpu.nvidia.com'].i == 3 && device.attributes['gpu.nvidia.com'].b"
        " && device.attributes['gpu.nvidia.com'].s == 'a'"
        " && device.attributes['gpu.nvidia.com'].v.isGreaterThan(semver('1.0.0'))"
        " && device.attributes['gpu.nvidia.com'].is == [1, 2] && device.attributes['gpu.nvidia.com'].bs == [false]"
        " && device.attributes['gpu.nvidia.com'].ss == ['x'] && size(device.attributes['gpu.nvidia.com'].vs) == 1"
        " && device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('1Gi'))"
    )
    assert compile_selector(expression).matches(device, "gpu.nvidia.com") is True
