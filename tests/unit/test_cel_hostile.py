"""No exception other than the CEL package's own typed errors escapes, for any expression and any device;
string escapes are read as cel-go reads them; selectors the tool writes compile as kube-apiserver compiles."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_migrate.dra.cel import SelectorError, SelectorEvaluationError, UnsupportedSelectorError, compile_selector

FRAGMENTS = [
    "device", ".", "attributes", "capacity", "driver", "allowMultipleAllocations", "['dra.example.com']",
    "[\"gpu.nvidia.com\"]", ".x", ".memory", "==", "!=", "<", ">=", "&&", "||", "!", "-", "+", "*", "/", "%",
    "(", ")", "[", "]", "{", "}", ",", ":", "?", "1", "0", "-9223372036854775808", "18446744073709551615u",
    "1.5", "0.0", "1e308", "'a'", '"\\x41"', "'\\?'", "r'\\.'", "'''x'''", "b'\\377'", "true", "null",
    "quantity('1Gi')", "semver('1.2.3')", ".compareTo(", ".isGreaterThan(", ".matches(", "'['", ".all(x, ",
    ".exists(k, v, ", ".map(x, ", ".filter(x, ", "x", "v", "k", "cel.bind(y, ", "y", "size(", "int(", "uint(",
    "double(", "string(", "dyn(", "type(", "has(", ".charAt(", ".indexOf(", ".substring(", ".split(",
    "lists.range(", ".sort()", ".slice(", ".flatten()", ".distinct()", ".transformList(i, v, ", "i", ".`a b`",
    ".?x", "[?0]", "sets.contains(", "ip('1.2.3.4')", "timestamp('2020-01-01T00:00:00Z')", ".join(", "\\",
    "'\\d'", "'", '"', "`", "\n", " ",
]  # fmt: skip

ATTRIBUTE = st.one_of(
    st.builds(lambda v: {"int": v}, st.integers(min_value=-(2**63), max_value=2**63 - 1)),
    st.builds(lambda v: {"bool": v}, st.booleans()),
    st.builds(lambda v: {"string": v}, st.text(max_size=8)),
    st.builds(lambda v: {"version": v}, st.sampled_from(["1.2.3", "v1", "1.2.3-rc.1+b", "x"])),
    st.just({}),
    st.just({"int": "nope"}),
)
DEVICE = st.fixed_dictionaries(
    {
        "name": st.text(max_size=4),
        "attributes": st.dictionaries(st.sampled_from(["x", "memory", "dra.example.com/x", "a/b/c", ""]), ATTRIBUTE),
        "capacity": st.dictionaries(
            st.sampled_from(["memory", "x"]),
            st.builds(lambda v: {"value": v}, st.sampled_from(["1Gi", "x", "", "1e400"])),
        ),
        "allowMultipleAllocations": st.sampled_from([None, True, False, "yes"]),
    }
)


def _evaluate(expression: str, device: dict[str, Any]) -> None:
    try:
        selector = compile_selector(expression)
    except SelectorError:
        return
    with contextlib.suppress(SelectorEvaluationError):
        selector.matches(device, "dra.example.com")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join), DEVICE)
def test_no_foreign_exception_for_any_expression_and_device(expression: str, device: dict[str, Any]) -> None:
    _evaluate(expression, device)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), DEVICE)
def test_no_foreign_exception_for_arbitrary_text(expression: str, device: dict[str, Any]) -> None:
    _evaluate(expression, device)


@pytest.mark.parametrize(
    "expression",
    [
        "'tacocat'.charAt(30) == ''",
        "'abc'.substring(5) == ''",
        "'abc'.indexOf('a', -1) == 0",
        "9223372036854775807 + 1 == 0",
        "int(device.attributes['dra.example.com'].big * 2.0) == 1",
        "device.attributes['dra.example.com'].s.matches('[')",
        "[1, 2].slice(2, 1) == []",
        "{'a': 1}.transformMapEntry(k, v, {'x': v}) == {}",
        "'a' * 2 == 'aa'",
        "1 + " * 400 + "1 == 1",
    ],
)
def test_hostile_expressions_give_typed_errors(expression: str) -> None:
    device = {"attributes": {"big": {"int": 2**62}, "s": {"string": "x"}}}
    _evaluate(expression, device)


def test_deep_nesting_is_a_typed_error() -> None:
    with pytest.raises(SelectorError):
        compile_selector("(" * 3000 + "true" + ")" * 3000)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("'a\\?b' == 'a?b'", True),
        ("'\\X41' == 'A'", True),
        ("'\\101' == 'A'", True),
        ("'\\u00e9' == 'é'", True),
        ("'\\U0001F431' == '🐱'", True),
        ("'''a\nb''' == 'a\\nb'", True),
        ('"""x"y""" == \'x"y\'', True),
        ("r'\\d' == '\\\\d'", True),
        ("b'\\xff' == b'\\377'", True),
        ("'\\`' == '`'", True),
        ("{'a b': 1}.`a b` == 1", True),
        ("device.`driver` == 'dra.example.com'", True),
    ],
)
def test_string_escapes_as_cel_go_reads_them(expression: str, expected: bool) -> None:
    assert compile_selector(expression).matches({}, "dra.example.com") is expected


@pytest.mark.parametrize(
    "expression",
    [
        "'NVIDIA H100'.matches('^NVIDIA\\.H100')",  # kube-apiserver v1.37.2: 422 invalid escape
        "'a' == '\\d'",
        "'a' == '\\x4'",
        "'a' == '\\u12'",
        "'a' == '\\400'",
        "'a' == '\\uD800'",
        "'a\nb' == 'a'",
        "'a'.matches('[')",  # cel.ValidateRegexLiterals
        "['a', 1] == []",  # HomogeneousAggregateLiterals
        "device.attributes['dra.example.com'].list.exists(x, x == 1)",  # any is not a comprehension range
        "int('x') == 1",  # folded when the program is built: program instantiation failed
        "[1].all(__result__, true)",
    ],
)
def test_rejected_as_kube_apiserver_rejects(expression: str) -> None:
    with pytest.raises(SelectorError) as e:
        compile_selector(expression)
    assert not isinstance(e.value, UnsupportedSelectorError)


@pytest.mark.parametrize(
    "expression",
    [
        "type(device.attributes['dra.example.com'].val1) == int",  # v1.37.2: too complex, exceeds cost limit
        "['x', 'y'].join() == 'xy'",
        "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c,"
        " [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, true)))))",
    ],
)
def test_cost_limit_cases_are_refused_with_a_way_to_check(expression: str) -> None:
    with pytest.raises(UnsupportedSelectorError, match="--kubeconfig"):
        compile_selector(expression)


@pytest.mark.parametrize(
    ("expression", "device", "expected"),
    [
        ("device.allowMultipleAllocations == false", {}, True),
        ("device.allowMultipleAllocations", {"allowMultipleAllocations": True}, True),
        ("device.attributes['dra.example.com'].n == 10.0", {"attributes": {"n": {"int": 10}}}, True),
        ("dyn(1) == 1u", {}, True),
        ("0.0/0.0 == 0.0/0.0", {}, False),
        ("dyn(9223372036854775807) < 9223372036854775808.0", {}, False),
        ("[1, 2].all(i, v, v > i)", {}, True),
        ("[3, 1, 2].sort() == [1, 2, 3]", {}, True),
        ("lists.range(3) == [0, 1, 2]", {}, True),
        ("[[1], [2, 3]].flatten() == [1, 2, 3]", {}, True),
        ("false && 1/0 == 1", {}, False),
    ],
)
def test_runtime_as_kubernetes(expression: str, device: dict[str, Any], expected: bool) -> None:
    assert compile_selector(expression).matches(device, "dra.example.com") is expected


@pytest.mark.parametrize(
    "expression",
    [
        # `_==_` is (A, A) in cel-go: cross-type numeric comparison is for the ordering operators only
        "1.0 == 1",
        "1 == 1u",
        "device.attributes['gpu.nvidia.com'].index == 0 && 1u != 1",
        "{'a': 1} == {'a': 1.0}",
        "[1] == [1u]",
        "1 in [1.0]",
        "1 in {'a': 1}",
        # `_?_:_` is (bool, A, A): branches of different types do not unify
        "(true ? 1 : 'a') == 1",
        "(device.driver == 'x' ? 1.0 : 2) > 0.5",
        "true ? [1] : []",  # unifies, but a list is not a selector's result
        # an undeclared reference is refused whatever else the expression uses, optional syntax included
        "device.attributes['gpu.nvidia.com'].?type.orValue('') == 'gpu' && undeclared",
        "undeclared.?x.orValue(1) == 1",
        "[?optional.none()].size() == 0 && y",
    ],
)
def test_compile_errors_are_refused_offline_never_matched(expression: str) -> None:
    with pytest.raises(SelectorError) as e:
        compile_selector(expression)
    assert not isinstance(e.value, UnsupportedSelectorError), e.value


@pytest.mark.parametrize(
    "expression",
    [
        "dyn(1) == 1.0",  # dyn is checked at run time
        "1 < 1.5",  # ordering across numeric types is on in Kubernetes
        "[1] == [dyn(1u)]",
        "device.attributes['gpu.nvidia.com'].index == 0.0",  # attribute values are `any`
        "(device.driver == 'x' ? 1 : 2) == 2",
        "[1, 2].exists(x, x == 2) ? true : false",
    ],
)
def test_what_unifies_still_compiles(expression: str) -> None:
    compile_selector(expression)


def test_optional_syntax_without_undeclared_names_is_still_refused_not_rejected() -> None:
    """Macro and optMap variables are declared: only a name nothing binds makes the verdict."""
    for expression in (
        "device.attributes['gpu.nvidia.com'].?type.orValue('') == 'gpu'",
        "[1, 2].exists(i, [1, 2][?i].optMap(n, n > 1).orValue(false))",
    ):
        with pytest.raises(UnsupportedSelectorError):
            compile_selector(expression)


# Nested comprehensions over literals: cel-go's estimate is at least the product of the sizes, so these are
# over resource.k8s.io's CELSelectorExpressionMaxCost (1,000,000) whatever else they use: refused, not declined.
_TEN = "[0,1,2,3,4,5,6,7,8,9]"
_SEVEN_DEEP = "".join(f"{_TEN}.all(v{i}, " for i in range(7)) + "true" + ")" * 7  # 10^7 iterations
_THOUSAND = "[" + ",".join(["0"] * 1001) + "]"
# The device's attribute and capacity maps, by domain and within one, are sized by the API server at their
# declared most entries, 32 (k8s.io/dynamic-resource-allocation cel/compile.go): four deep is 32^4 iterations.
_DEVICE_MAPS_4_DEEP = (
    "device.attributes.all(a, device.capacity['d'].all(b, device.attributes['x'].all(c,"
    " device.capacity.exists(d, true))))"
)


@pytest.mark.parametrize(
    "expression",
    [
        _SEVEN_DEEP,
        _DEVICE_MAPS_4_DEEP,
        f"{_THOUSAND}.exists(a, {_THOUSAND}.exists(b, a != b))",
        # beside something the offline evaluator declines (join: its cost estimate is not reproduced)
        f"['x'].join() == 'x' && {_SEVEN_DEEP}",
        f"{_SEVEN_DEEP} && ['x'].join() == 'x'",
        f"{_TEN}.map(a, {_THOUSAND}.filter(b, {_THOUSAND}.exists(c, b == c))).size() > 0",
    ],
    ids=["7-deep", "device-maps-4-deep", "1001x1001", "after-declined", "before-declined", "map-filter-exists"],
)
def test_selectors_over_the_cost_limit_are_refused_offline(expression: str) -> None:
    assert len(expression.encode()) <= 10 * 1024  # within the length limit: the cost is what refuses them
    with pytest.raises(SelectorError, match="exceeds cost limit") as e:
        compile_selector(expression)
    assert not isinstance(e.value, UnsupportedSelectorError)
    assert "1,000,000" in str(e.value)


@pytest.mark.parametrize(
    "expression",
    [
        # 32^3 iterations: the API server accepts it; its estimate is not reproduced here, so it is declined
        "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, true)))",
        # `device` rebound by a comprehension is not the device: no size is assumed for its maps
        "[{'attributes': [1]}].all(device, device.attributes.all(a, device.attributes.all(b,"
        " device.attributes.all(c, device.attributes.all(d, true)))))",
    ],
    ids=["device-maps-3-deep", "device-rebound"],
)
def test_nested_comprehensions_not_provably_over_the_limit_are_not_refused(expression: str) -> None:
    with contextlib.suppress(UnsupportedSelectorError):  # declined (validate it server-side) is fine
        compile_selector(expression)  # any other SelectorError, a refusal, fails the test


def test_a_comprehension_under_the_cost_limit_still_compiles() -> None:
    compile_selector(f"{_THOUSAND}.exists(a, a == 0)")  # ~1,000 iterations
