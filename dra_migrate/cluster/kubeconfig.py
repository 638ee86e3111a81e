"""Checking a kubeconfig before the Kubernetes client reads it, so a malformed one is one line naming the
file and the line or key, never an internal error.

The client fails on broken YAML with a parser traceback and on bad base64 in `*-data` fields with
"Invalid base64-encoded string" and no word of where. Both are found here first: the YAML with its line
(`cluster/yamlio.py`), the base64 fields by their key path (`clusters[0].cluster.certificate-authority-data`),
decoded strictly as the client (and kubectl, Go's base64.StdEncoding) decodes them.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Any

from dra_migrate.errors import InputError
from dra_migrate.kube.config import kubeconfig_paths, new_api_client, piped_kubeconfig

_HINT = "fix the kubeconfig (kubectl config view --raw shows what kubectl reads), or pass another with --kubeconfig"
# (list key, entry key, the base64 fields inside it): client-go clientcmd/api/v1 types.go.
_DATA_FIELDS = (
    ("clusters", "cluster", ("certificate-authority-data",)),
    ("users", "user", ("client-certificate-data", "client-key-data")),
)


def check_kubeconfig(paths: str) -> None:
    """Every existing file of `paths` (one path, or a $KUBECONFIG list) is YAML with well-formed sections
    and base64 fields; raises InputError naming the file and the line or key otherwise."""
    from dra_migrate.cluster.yamlio import load_yaml_documents

    for p in paths.split(os.pathsep):
        f = Path(p).expanduser()
        piped = piped_kubeconfig(p) if p else None  # `--kubeconfig <(...)`: read once, for the client too
        if piped is None and (not p or not f.is_file()):
            continue
        try:
            text = piped.decode("utf-8") if piped is not None else f.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"kubeconfig {f}: not UTF-8 text", _HINT) from e
        except OSError:
            continue  # the client says it cannot read the file, with the path
        docs = list(load_yaml_documents(text, f"kubeconfig {f}"))
        if not docs:
            continue
        doc = docs[0]
        if not isinstance(doc, dict):
            raise InputError(f"kubeconfig {f}: not a kubeconfig (a {type(doc).__name__}, not a mapping)", _HINT)
        _check_sections(doc, f)


def checked_api_client(kubeconfig: Path | None, context: str | None = None, **kwargs: Any) -> Any:
    """`kube.new_api_client`, the kubeconfig checked first (`check_kubeconfig`): every command that writes
    to a cluster (apply, rollback, unlock, probe) or reads apply's journal from it (status, report with
    --state in-cluster) builds its client here, as the read-only commands' `LiveCluster` does; a malformed
    kubeconfig was an internal error on those paths."""
    check_kubeconfig(kubeconfig_paths(kubeconfig))
    return new_api_client(kubeconfig, context=context, **kwargs)


def _check_sections(doc: dict[str, Any], f: Path) -> None:
    for section, entry_key, fields in _DATA_FIELDS:
        items = doc.get(section)
        if items is None:
            continue
        if not isinstance(items, list):
            raise InputError(f"kubeconfig {f}: `{section}` must be a list", _HINT)
        for i, item in enumerate(items):
            entry = item.get(entry_key) if isinstance(item, dict) else None
            if not isinstance(entry, dict):
                continue
            for name in fields:
                value = entry.get(name)
                if value is None:
                    continue
                where = f"{section}[{i}].{entry_key}.{name}"
                if not isinstance(value, str):
                    raise InputError(f"kubeconfig {f}: {where} must be a base64 string", _HINT)
                try:
                    # Go's base64.StdEncoding skips \r and \n, and so does kubectl; nothing else is let through.
                    base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)
                except (binascii.Error, ValueError) as e:
                    raise InputError(f"kubeconfig {f}: {where} is not valid base64 ({e})", _HINT) from e
