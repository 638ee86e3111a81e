"""dra_migrate.dra.cel: DRA selectors evaluated offline with the Kubernetes CEL extensions.

Expected values follow kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/cel/library/quantity.go and
semverlib.go (their doc examples) and staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.dra.cel import (
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
    SelectorError,
    SelectorEvaluationError,
    UnsupportedSelectorError,
    compile_selector,
    matches_all,
    parse_quantity,
    parse_semver,
)

DRIVER = "gpu.nvidia.com"
A = "device.attributes['gpu.nvidia.com']"
C = "device.capacity['gpu.nvidia.com']"

# As the NVIDIA chart's DeviceClasses (deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml).
GPU_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
MIG_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"


def gpu(
    memory: str = "80Gi", product: str = "NVIDIA H100 80GB HBM3", driver_version: str = "580.95.5"
) -> dict[str, Any]:
    return {
        "name": "gpu-0",
        "attributes": {
            "type": {"string": "gpu"},
            "productName": {"string": product},
            "driverVersion": {"version": driver_version},
            "index": {"int": 0},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:10"},
        },
        "capacity": {"memory": {"value": memory}},
    }


def mig(profile: str = "1g.10gb") -> dict[str, Any]:
    return {
        "name": "gpu-0-mig-19-0",
        "attributes": {
            "type": {"string": "mig"},
            "profile": {"string": profile},
            "productName": {"string": "NVIDIA H100"},
        },
        "capacity": {"memory": {"value": "9984Mi"}},
    }


def match(expression: str, device: dict[str, Any], driver: str = DRIVER) -> bool:
    return compile_selector(expression).matches(device, driver)


def test_nvidia_class_selectors() -> None:
    assert match(GPU_CLASS, gpu())
    assert not match(GPU_CLASS, mig())
    assert match(MIG_CLASS, mig())
    assert not match(GPU_CLASS, gpu(), driver="other.example.com")
    profile = f"{MIG_CLASS} && {A}.profile == '1g.10gb'"
    assert match(profile, mig("1g.10gb"))
    assert not match(profile, mig("3g.40gb"))


@pytest.mark.parametrize(
    ("expression", "memory", "expected"),
    [
        (f"{C}.memory.compareTo(quantity('64Gi')) > 0", "80Gi", True),
        (f"{C}.memory.compareTo(quantity('64Gi')) > 0", "40Gi", False),
        (f"{C}.memory.compareTo(quantity('80Gi')) >= 0", "81559Mi", False),
        (f"{C}.memory.isGreaterThan(quantity('40Gi'))", "81559Mi", True),
        (f"{C}.memory.isLessThan(quantity('40Gi'))", "81559Mi", False),
        (f"quantity('40Gi').isLessThan({C}.memory)", "81559Mi", True),
        (f"quantity('100Gi').compareTo({C}.memory) == 1", "81559Mi", True),
        # Binary and decimal suffixes: 80Gi is 85,899,345,920 bytes, more than 85G.
        (f"{C}.memory.compareTo(quantity('85G')) > 0", "80Gi", True),
    ],
)
def test_memory_quantity_comparisons(expression: str, memory: str, expected: bool) -> None:
    assert match(expression, gpu(memory=memory)) is expected


def test_quantity_equality_is_by_value() -> None:
    assert match(f"{C}.memory == quantity('81920Mi')", gpu(memory="80Gi"))
    assert match("quantity('200M') == quantity('0.2G')", gpu())
    assert not match(f"{C}.memory == quantity('80G')", gpu(memory="80Gi"))
    # `!=` of two Quantities is refused by the API server's cost limit (test_cel_nvidia_hostile); `!(==)` is not.
    assert match(f"!({C}.memory == quantity('64Gi'))", gpu(memory="80Gi"))


def test_quantity_library_examples() -> None:
    # The examples in quantity.go's doc comment.
    for expression in (
        "quantity('200M').compareTo(quantity('0.2G')) == 0",
        "quantity('50M').compareTo(quantity('50Mi')) == -1",
        "quantity('50k').add(quantity('20k')) == quantity('70k')",
        "quantity('50k').add(20) == quantity('50020')",
        "quantity('50k').sub(20000) == quantity('30k')",
        "quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')",
        "quantity('50k').asInteger() == 50000",
        "quantity('50k').sub(20000).asApproximateFloat() == 30000.0",
        "quantity('50000000G').isInteger()",
        "!quantity('9999999999999999999999999999999999999G').isInteger()",
        # The doc comment writes `<Quantity>.sign()`, but `sign` is declared global only (test_cel_nvidia_hostile).
        "sign(quantity('-1')) == -1 && sign(quantity('0')) == 0",
        "isQuantity('1.3Gi') && !isQuantity('200K') && !isQuantity('Mi') && !isQuantity('1,3G')",
        "quantity('1.5e3') == quantity('1500')",
    ):
        assert match(expression, gpu()), expression
    with pytest.raises(SelectorEvaluationError):
        match("quantity('200K') == quantity('1')", gpu())
    with pytest.raises(SelectorEvaluationError, match="cannot convert value to integer"):
        match("quantity('9999999999999999999999999999999999999G').asInteger() > 0", gpu())


def test_parse_quantity() -> None:
    assert parse_quantity("80Gi").value == 80 * 2**30
    assert parse_quantity("100m").value * 10 == 1
    assert parse_quantity("1n") == parse_quantity("0.000000001")
    with pytest.raises(ValueError):
        parse_quantity("Three")


@pytest.mark.parametrize(
    ("expression", "version", "expected"),
    [
        (f"{A}.driverVersion.isGreaterThan(semver('550.0.0'))", "580.95.5", True),
        (f"{A}.driverVersion.isGreaterThan(semver('550.0.0'))", "535.104.5", False),
        (f"{A}.driverVersion.isLessThan(semver('580.95.10'))", "580.95.5", True),  # numeric, not lexical
        (f"{A}.driverVersion.compareTo(semver('570.133.20')) >= 0", "570.133.20", True),
        (f"{A}.driverVersion.compareTo(semver('570.133.20')) >= 0", "570.86.15", False),
        (f"{A}.driverVersion == semver('580.95.5')", "580.95.5", True),
        (f"{A}.driverVersion.major() == 580 && {A}.driverVersion.minor() == 95", "580.95.5", True),
        (f"{A}.driverVersion.isLessThan(semver('580.95.5'))", "580.95.5-rc.1", True),
        (f"{A}.driverVersion.compareTo(semver('v580.95', true)) > 0", "580.95.5", True),
    ],
)
def test_semver_driver_version(expression: str, version: str, expected: bool) -> None:
    assert match(expression, gpu(driver_version=version)) is expected


def test_semver_library_examples() -> None:
    assert match("semver('1.2.3').compareTo(semver('2.0.0')) == -1", gpu())
    assert match("semver('01.01.01', true) == semver('1.1.1')", gpu())
    assert match("isSemver('1.0.0') && !isSemver('v1.0') && isSemver('v1.0', true) && !isSemver('hello')", gpu())
    assert parse_semver("1.0.0-alpha.1").compare(parse_semver("1.0.0-alpha.beta")) == -1
    assert parse_semver("1.0.0+build.1") == parse_semver("1.0.0")
    with pytest.raises(ValueError):
        parse_semver("01.0.0")


def test_product_name_string_functions() -> None:
    h100, a100 = gpu(), gpu(product="NVIDIA A100-SXM4-80GB")
    for expression, on_h100, on_a100 in (
        (f"{A}.productName.startsWith('NVIDIA H100')", True, False),
        (f"{A}.productName.lowerAscii().contains('a100')", False, True),
        (f"{A}.productName.matches('^NVIDIA (H|A)100')", True, True),
        (f"{A}.productName.matches('(?i)sxm4')", False, True),
        (f"{A}.productName.endsWith('HBM3')", True, False),
        (f"{A}.productName.upperAscii().split(' ')[1] == 'H100'", True, False),
        (f"{A}.productName.replace('NVIDIA ', '').substring(0, 4) == 'A100'", False, True),
        (f"{A}.productName.indexOf('100') == 8", True, True),
        (f"size({A}.productName) > 10", True, True),
        (f"{A}.productName.find('[AH][0-9]+') == 'H100'", True, False),
    ):
        assert match(expression, h100) is on_h100, expression
        assert match(expression, a100) is on_a100, expression


def test_has_guards_and_bind() -> None:
    guarded = f"has({A}.profile) && {A}.profile == '1g.10gb'"
    assert not match(guarded, gpu())
    assert match(guarded, mig("1g.10gb"))
    assert match(f"!has({A}.profile) || {A}.profile.startsWith('1g')", gpu())
    assert match("cel.bind(d, device.attributes['gpu.nvidia.com'], d.type == 'gpu' && d.index == 0)", gpu())
    assert match("cel.bind(m, device.capacity['gpu.nvidia.com'].memory, m.isGreaterThan(quantity('1Gi')))", gpu())
    assert match("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:10'", gpu())


def test_unknown_domain_is_an_empty_map() -> None:
    assert match("size(device.attributes['example.com']) == 0", gpu())
    assert match("!('x' in device.attributes['example.com'])", gpu())
    with pytest.raises(SelectorEvaluationError, match="no such member"):
        match("device.attributes['example.com'].x == 1", gpu())


def test_missing_attribute_is_an_error_and_no_match() -> None:
    selector = compile_selector(f"{A}.profile == '1g.10gb'")
    with pytest.raises(SelectorEvaluationError, match="profile"):
        selector.matches(gpu(), DRIVER)
    assert not matches_all([compile_selector(GPU_CLASS), selector], gpu(), DRIVER)
    # && and || absorb an error when the other side decides, as in cel-go.
    assert not match(f"{A}.type == 'mig' && {A}.profile == '1g.10gb'", gpu())
    assert match(f"{A}.profile == '1g.10gb' || {A}.type == 'gpu'", gpu())


def test_matches_all() -> None:
    classes = [compile_selector(GPU_CLASS), compile_selector(f"{C}.memory.isGreaterThan(quantity('40Gi'))")]
    assert matches_all(classes, gpu(), DRIVER)
    assert not matches_all(classes, gpu(memory="40Gi"), DRIVER)
    assert matches_all([], gpu(), DRIVER)


def test_results_are_cached_per_attribute_set() -> None:
    selector = compile_selector(f"{GPU_CLASS} && {C}.memory.isGreaterThan(quantity('40Gi'))")
    devices = [dict(gpu(), name=f"gpu-{i}") for i in range(100)]
    assert all(selector.matches(d, DRIVER) for d in devices)
    assert len(selector._cache) == 1
    selector.matches(gpu(memory="40Gi"), DRIVER)
    assert len(selector._cache) == 2
    assert compile_selector(GPU_CLASS) is compile_selector(GPU_CLASS)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("foo(device.driver)", "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo'"),
        (f"{A}.productName.toLower() == 'x'", "undeclared reference to 'toLower'"),
        ("gpu.type == 'gpu'", "undeclared reference to 'gpu'"),
        ("device.drivr == 'gpu.nvidia.com'", "undefined field 'drivr'"),
        ("quantity('1Gi') < quantity('2Gi')", "found no matching overload for '_<_'"),
        (f"{C}.memory.isGreaterThan(40)", "found no matching overload for 'isGreaterThan'"),
        ("device.driver == 1", "found no matching overload for '_==_'"),
        ("device.driver && true", "found no matching overload for '_&&_'"),
        ("has(device.attributes['gpu.nvidia.com'])", "invalid argument to has() macro"),
        ("device.driver ==", "compilation failed"),
        ("1 + 1", "must evaluate to bool or the unknown type, not int"),
        ("device.driver", "must evaluate to bool or the unknown type, not string"),
        (f"{C}.memory", "not kubernetes.Quantity"),
        ("", "must not be empty"),
    ],
)
def test_compile_errors(expression: str, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        compile_selector(expression)
    assert message in str(info.value)


def test_dyn_results_compile_and_fail_at_runtime_when_not_bool() -> None:
    # An attribute is dyn: the API server accepts it, the scheduler fails when it is not a bool.
    selector = compile_selector(f"{A}.productName")
    with pytest.raises(SelectorEvaluationError, match="could not be converted to bool"):
        selector.matches(gpu(), DRIVER)


def test_unsupported_libraries_are_reported_not_guessed() -> None:
    for expression in ("isIP('10.0.0.1')", "device.?driver.orValue('') == ''", "'%d'.format([1]) == '1'"):
        with pytest.raises(UnsupportedSelectorError):
            compile_selector(expression)


def test_sets_library_uses_cel_equality() -> None:
    # cel-go ext/sets.go; answers as k8s v1.37.2 gives them (celgo-sets suite in tests/conformance).
    assert match("sets.contains([1, 2], [dyn(2.0)])", gpu())
    assert match("sets.equivalent([1, 1, 2], [2, 1])", gpu())
    for mixed in ("sets.contains([1, 2], [2.0])", "sets.intersects([1], ['1'])"):  # one type parameter
        with pytest.raises(SelectorError):
            compile_selector(mixed)


def test_length_limit() -> None:
    clause = " && device.driver == 'gpu.nvidia.com'"
    base = "device.driver == 'gpu.nvidia.com'"
    fits = base + clause * ((CEL_SELECTOR_EXPRESSION_MAX_LENGTH - len(base)) // len(clause))
    fits += " " * (CEL_SELECTOR_EXPRESSION_MAX_LENGTH - len(fits))
    assert len(fits) == 10 * 1024
    assert compile_selector(fits).matches(gpu(), DRIVER)
    with pytest.raises(SelectorError, match="Too long"):
        compile_selector(fits + " ")
