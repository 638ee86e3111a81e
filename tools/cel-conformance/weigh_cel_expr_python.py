"""Weigh cel-expr-python (Google's CEL runtime for Python, cel-cpp inside) against the hand-written checker.

The compile verdicts of cel-cpp's checker on tests/conformance (compile only; the Kubernetes quantity and
semver libraries declared by signature; cel-cpp's bindings, math, optional and strings extensions), against
the API server's answers. Not a dependency of the project: `pip install cel-expr-python` to run it, from the
repository root: `python3 tools/cel-conformance/weigh_cel_expr_python.py`. Results: docs/cel-engine.md.
"""

import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_math, ext_optional, ext_strings

from tests.conformance.verdicts import load

T = cel.Type
Q = T.AbstractType("kubernetes.Quantity")
S = T.AbstractType("kubernetes.Semver")


def ov(i, ret, params, member=False):
    return cel.Overload(id=i, return_type=ret, parameters=params, is_member=member)


fns = [
    cel.FunctionDecl("quantity", [ov("quantity_string", Q, [T.STRING])]),
    cel.FunctionDecl("isQuantity", [ov("is_quantity_string", T.BOOL, [T.STRING])]),
    cel.FunctionDecl("semver", [ov("semver_string", S, [T.STRING]), ov("semver_string_bool", S, [T.STRING, T.BOOL])]),
    cel.FunctionDecl(
        "isSemver",
        [ov("is_semver_string", T.BOOL, [T.STRING]), ov("is_semver_string_bool", T.BOOL, [T.STRING, T.BOOL])],
    ),
]
for name, ret in [("isGreaterThan", T.BOOL), ("isLessThan", T.BOOL), ("compareTo", T.INT)]:
    fns.append(cel.FunctionDecl(name, [ov(f"q_{name}", ret, [Q, Q], True), ov(f"s_{name}", ret, [S, S], True)]))
for name, ret, extra in [
    ("add", Q, [Q]),
    ("sub", Q, [Q]),
    ("asInteger", T.INT, []),
    ("asApproximateFloat", T.DOUBLE, []),
    ("isInteger", T.BOOL, []),
    ("sign", T.INT, []),
]:
    fns.append(cel.FunctionDecl(name, [ov(f"q_{name}", ret, [Q, *extra], True)]))
for name in ("major", "minor", "patch"):
    fns.append(cel.FunctionDecl(name, [ov(f"s_{name}", T.INT, [S], True)]))
device = T.AbstractType("kubernetes.DRADevice")
env = cel.NewEnv(
    variables={"device": T.Map(T.STRING, T.DYN)},
    functions=fns,
    extensions=[ext_bindings.ExtBindings(), ext_math.ExtMath(), ext_optional.ExtOptional(), ext_strings.ExtStrings()],
)
tally = collections.Counter()
t0 = time.perf_counter()
for case, answer in load():
    try:
        e = env.compile(case["expression"])
        rt = e.return_type()
        ours = "compiles" if rt in (T.BOOL, T.DYN) else "rejected"
    except Exception:
        ours = "rejected"
    theirs = "rejected" if answer["verdict"] == "rejected" else "compiles"
    tally[(ours, theirs)] += 1
print(tally, f"{time.perf_counter() - t0:.2f}s")
for x in ["1.0 == 1", "(true ? 1 : 'a') == 1", "1 < 1.5", "quantity('1Gi').isGreaterThan(quantity('1'))"]:
    try:
        env.compile(x)
        print("compiles", x)
    except Exception as ex:
        print("rejected", x, str(ex)[:100])
