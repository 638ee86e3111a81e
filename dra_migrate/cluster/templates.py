"""The pod-template path table: where each workload kind keeps its pod templates.

The table is data (templates.yaml beside this file) that users extend with their own CRDs. This module
only resolves it against an object; what a template requests is counted in `dra_migrate.inventory`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from dra_migrate.errors import InputError
from dra_migrate.fileio import not_text, text_of

Obj = dict[str, Any]


@dataclass(frozen=True)
class ReplicaFactor:
    path: str | None = None
    default: int = 1
    add: int = 0
    value: int | None = None
    selected_nodes: bool = False
    # a count worked out by inventory from the map at `path` (inventory/fanout.py): `argoSteps`, `sparkExecutors`
    counter: str | None = None


COUNTERS = ("argoSteps", "sparkExecutors")


@dataclass(frozen=True)
class RoleSpec:
    template: str
    form: str  # podTemplate | podSpec | containers | resources | named
    each: str | None = None
    # form `resources`: the path (relative to the template) of a ResourceRequirements that stands for the
    # one GPU container of each pod (Kubeflow Trainer v2's `resourcesPerNode`): counted, never rewritten.
    # form `named`: the path of a {name, quantity} that the operator writes into the limits of each pod's one
    # GPU container (the Spark operator's `gpu`): counted, never rewritten.
    resources: str | None = None
    containers: tuple[str, ...] = ()
    init_containers: tuple[str, ...] = ()
    replicas: tuple[ReplicaFactor, ...] = (ReplicaFactor(value=1),)
    if_present: str | None = None
    unless_present: str | None = None


@dataclass(frozen=True)
class KindSpec:
    kind: str  # kind key
    roles: tuple[RoleSpec, ...]
    api_version: str | None = None  # for user kinds: how to list them live
    plural: str | None = None
    namespaced: bool = True
    # A blueprint's templates are copied into other objects' pods (Kubeflow TrainingRuntime): its requests
    # are nobody's demand, so inventory reads it but counts no consumer for it.
    blueprint: bool = False


@dataclass(frozen=True)
class ResolvedTemplate:
    """One pod template found in an object."""

    path: str  # concrete path, e.g. "spec.pytorchReplicaSpecs.Worker.template"
    role: RoleSpec
    template: Obj  # the template object at `path`
    item: Obj  # the role item (`each`) or the whole object; replica paths resolve against it
    root: Obj

    def containers(self) -> list[Obj]:
        if self.role.form == "resources":
            res = get_path(self.template, self.role.resources or "resources")
            name = (self.role.resources or "resources").rsplit(".", 1)[-1]
            return [{"name": name, "resources": res}] if isinstance(res, dict) else []
        if self.role.form == "named":
            return _named(get_path(self.template, self.role.resources or "gpu"), self.role.resources or "gpu")
        return _collect(self.template, self.role.containers or _default_paths(self.role.form, "containers"))

    def init_containers(self) -> list[Obj]:
        paths = self.role.init_containers or _default_paths(self.role.form, "initContainers")
        return _collect(self.template, paths)

    def pod_spec(self) -> Obj:
        """The PodSpec-like object (for nodeSelector, affinity, tolerations)."""
        if self.role.form == "podTemplate":
            spec = self.template.get("spec")
            return spec if isinstance(spec, dict) else {}
        return self.template


def _named(spec: Any, path: str) -> list[Obj]:
    """A {name, quantity} as the one container whose limits it becomes. The Spark operator's webhook writes
    `limits[name] = quantity` into the Spark container and skips a spec with no name or a quantity <= 0
    (kubeflow/spark-operator v2.3.0 internal/webhook/sparkpod_defaulter.go `addGPU`); so does this."""
    if not isinstance(spec, dict):
        return []
    name, quantity = spec.get("name"), spec.get("quantity")
    if not isinstance(name, str) or not name or isinstance(quantity, bool) or not isinstance(quantity, int):
        return []
    return [{"name": path.rsplit(".", 1)[-1], "resources": {"limits": {name: quantity}}}] if quantity > 0 else []


def _default_paths(form: str, what: str) -> tuple[str, ...]:
    if form == "podTemplate":
        return (f"spec.{what}",)
    if form == "podSpec":
        return (what,)
    return ()


def _collect(base: Obj, paths: tuple[str, ...]) -> list[Obj]:
    out: list[Obj] = []
    for p in paths:
        v = get_path(base, p)
        if isinstance(v, list):
            out.extend(c for c in v if isinstance(c, dict))
        elif isinstance(v, dict):
            out.append(v)
    return out


def get_path(obj: Any, path: str) -> Any:
    """Follow a dotted path through dicts; "." is the object itself. Missing keys give None."""
    if path in (".", ""):
        return obj
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _iter_each(obj: Any, each: str) -> Iterator[tuple[str, Obj]]:
    """Expand an `each` path: "a.b.*" (map values) or "a.b[]" (list items), the list's items maybe expanded
    again ("a[].b[]", "a[][]": each item's own path, or each item of a list of lists, as Argo's `steps`).
    Yields (concrete path, item)."""
    head, nested, rest = each.partition("[]")
    if nested and rest:
        container = get_path(obj, head)
        for i, inner in enumerate(container if isinstance(container, list) else ()):
            for path, item in _iter_each(inner, rest.removeprefix(".")):
                yield f"{head}[{i}]{'' if path.startswith('[') else '.'}{path}", item
        return
    if each.endswith(".*"):
        base = each[:-2]
        container = get_path(obj, base)
        if isinstance(container, dict):
            for name in sorted(container, key=str):  # YAML keys may be numbers too
                item = container[name]
                if isinstance(item, dict):
                    yield f"{base}.{name}", item
    elif each.endswith("[]"):
        base = each[:-2]
        container = get_path(obj, base)
        if isinstance(container, list):
            for i, item in enumerate(container):
                if isinstance(item, dict):
                    yield f"{base}[{i}]", item
    else:
        item = get_path(obj, each)
        if isinstance(item, dict):
            yield each, item


def _join(prefix: str, rel: str) -> str:
    if rel in (".", ""):
        return prefix
    return f"{prefix}.{rel}" if prefix else rel


class TemplateTable:
    def __init__(self, kinds: dict[str, KindSpec]) -> None:
        self._kinds = kinds

    @classmethod
    def builtin(cls) -> TemplateTable:
        global _BUILTIN
        if _BUILTIN is None:
            text = resources.files("dra_migrate.cluster").joinpath("templates.yaml").read_text()
            _BUILTIN = cls(_parse_table(_load_yaml(text, "templates.yaml"), "templates.yaml"))
        return _BUILTIN

    def extended(self, path: Path) -> TemplateTable:
        """This table with the entries of a user's file added (an entry for a known kind replaces it)."""
        try:
            text = text_of(path.read_bytes())
        except OSError as e:
            raise InputError(f"cannot read template table {path}: {e.strerror}", "check the --templates path") from e
        except UnicodeDecodeError as e:
            raise InputError(f"template table {path}: {not_text(e)} (byte {e.start + 1})", _HINT) from e
        merged = dict(self._kinds)
        merged.update(_parse_table(_load_yaml(text, str(path)), str(path)))
        return TemplateTable(merged)

    def kind_keys(self) -> list[str]:
        return list(self._kinds)

    def spec(self, key: str) -> KindSpec | None:
        return self._kinds.get(key)

    def is_blueprint(self, key: str) -> bool:
        spec = self._kinds.get(key)
        return spec is not None and spec.blueprint

    def user_kinds(self) -> list[KindSpec]:
        return [k for k in self._kinds.values() if k.api_version and k.plural]

    def resolve(self, key: str, obj: Obj) -> list[ResolvedTemplate]:
        spec = self._kinds.get(key)
        if spec is None:
            return []
        out: list[ResolvedTemplate] = []
        for role in spec.roles:
            items = list(_iter_each(obj, role.each)) if role.each else [("", obj)]
            for prefix, item in items:
                if role.if_present and get_path(item, role.if_present) is None:
                    continue
                if role.unless_present and get_path(item, role.unless_present) is not None:
                    continue
                tmpl = get_path(item, role.template)
                if not isinstance(tmpl, dict):
                    continue
                out.append(ResolvedTemplate(_join(prefix, role.template), role, tmpl, item, obj))
        return out


_BUILTIN: TemplateTable | None = None


def _load_yaml(text: str, name: str) -> Any:
    from dra_migrate.cluster.yamlio import load_yaml_documents

    docs = list(load_yaml_documents(text, name))
    return docs[0] if docs else []


_HINT = "fix the template table (docs/pod-templates.md)"


def _parse_table(data: Any, name: str) -> dict[str, KindSpec]:
    """Every field is checked for the type the resolver reads before anything uses it: a path that is a
    map or a factor that is not a number is refused here, naming the entry, not met later as a crash."""
    if not isinstance(data, list):
        raise InputError(f"{name}: a template table is a list of {{kind, roles}} entries", "see README 'Templates'")
    out: dict[str, KindSpec] = {}
    for i, entry in enumerate(data):
        where = f"{name}: entry {i + 1}"
        if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str):
            raise InputError(f"{where}: needs `kind` (e.g. example.com/MyJob)", _HINT)
        roles = entry.get("roles")
        if not isinstance(roles, list) or not roles:
            raise InputError(f"{where} ({entry['kind']}): needs a non-empty `roles` list", _HINT)
        where = f"{where} ({entry['kind']})"
        out[entry["kind"]] = KindSpec(
            kind=entry["kind"],
            roles=tuple(_parse_role(r, where) for r in roles),
            api_version=_text(entry, "apiVersion", where),
            plural=_text(entry, "plural", where),
            namespaced=bool(entry.get("namespaced", True)),
            blueprint=bool(entry.get("blueprint", False)),
        )
    return out


def _text(d: dict[Any, Any], key: str, where: str) -> str | None:
    value = d.get(key)
    if value is not None and not isinstance(value, str):
        raise InputError(f"{where}: `{key}` must be a string, not {type(value).__name__}", _HINT)
    return value


def _texts(d: dict[Any, Any], key: str, where: str) -> tuple[str, ...]:
    value = d.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: `{key}` must be a list of paths", _HINT)
    return tuple(value)


def _number(d: dict[Any, Any], key: str, default: int, where: str) -> int:
    value = d.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InputError(f"{where}: replicas `{key}` must be a whole number, not {value!r}", _HINT)
    try:
        return int(value)
    except ValueError as e:
        raise InputError(f"{where}: replicas `{key}` must be a whole number, not {value!r}", _HINT) from e


def _parse_role(r: Any, where: str) -> RoleSpec:
    if not isinstance(r, dict) or not isinstance(r.get("template"), str):
        raise InputError(f"{where}: each role needs `template`", _HINT)
    form = r.get("form", "podTemplate")
    if form not in ("podTemplate", "podSpec", "containers", "resources", "named"):
        raise InputError(
            f"{where}: form must be podTemplate, podSpec, containers, resources or named, not {form!r}", _HINT
        )
    replicas = r.get("replicas", [{"value": 1}])
    if not isinstance(replicas, list):
        raise InputError(f"{where}: `replicas` must be a list of factors", _HINT)
    return RoleSpec(
        template=r["template"],
        form=form,
        each=_text(r, "each", where),
        containers=_texts(r, "containers", where),
        init_containers=_texts(r, "initContainers", where),
        replicas=tuple(_parse_factor(f, where) for f in replicas),
        if_present=_text(r, "if", where),
        unless_present=_text(r, "unless", where),
        resources=_text(r, "resources", where),
    )


def _parse_factor(f: Any, where: str) -> ReplicaFactor:
    field_names = {"path", "default", "add", "value", "selectedNodes", "counter"}
    if not isinstance(f, dict) or not f.keys() <= field_names or not f:
        raise InputError(
            f"{where}: a replicas factor is {{path, default, add}}, {{value}}, {{selectedNodes}} or {{counter, path}}",
            _HINT,
        )
    counter = _text(f, "counter", where)
    if counter is not None and (counter not in COUNTERS or not f.get("path")):
        raise InputError(f"{where}: a counter is one of {', '.join(COUNTERS)}, with the `path` it reads", _HINT)
    return ReplicaFactor(
        path=_text(f, "path", where),
        default=_number(f, "default", 1, where),
        add=_number(f, "add", 0, where),
        value=None if f.get("value") is None else _number(f, "value", 1, where),
        selected_nodes=bool(f.get("selectedNodes", False)),
        counter=counter,
    )
