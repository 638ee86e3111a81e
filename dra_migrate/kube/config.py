"""Connecting to a cluster: kubeconfig resolution as kubectl does it, and the client built from it.

--kubeconfig, else $KUBECONFIG (a colon-separated list, merged), else ~/.kube/config, else the
in-cluster service account. The context: --context, else the first file of the list that sets
current-context (kubectl's rule).
"""

from __future__ import annotations

import functools
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dra_migrate.errors import ClusterError
from dra_migrate.kube.client import REAUTH_ATTR, USER_AGENT, WRITE_RETRIES, Kube, RateLimit, Reauthenticate, RetryPolicy


def kubeconfig_paths(kubeconfig: Path | str | None) -> str:
    """--kubeconfig, else $KUBECONFIG (a list), else ~/.kube/config: as kubectl resolves it."""
    return str(kubeconfig) if kubeconfig else os.environ.get("KUBECONFIG") or "~/.kube/config"


def piped_kubeconfig(path: str) -> bytes | None:
    """The bytes of a kubeconfig that is not a regular file (`--kubeconfig <(sops -d kubeconfig.enc)`, which
    keeps the credentials off disk), read once and kept in memory: a pipe reads empty the second time, and a
    command reads its kubeconfig several times (its check, the current context, each API client: before,
    the second read found nothing). None for a regular file, a directory or nothing there: those are read
    where they are, as they are now."""
    try:
        found = os.stat(Path(path).expanduser())
    except OSError:
        return None
    if stat.S_ISREG(found.st_mode) or stat.S_ISDIR(found.st_mode):
        return None
    return _read_once(str(Path(path).expanduser()), found.st_dev, found.st_ino)


@functools.cache
def _read_once(path: str, _device: int, _inode: int) -> bytes:
    # Keyed by the pipe itself as well as its name: `/dev/fd/63` names another pipe in another run.
    with open(path, "rb") as f:
        return f.read()


def _piped_document(path: str) -> Any:
    """The piped kubeconfig `path` as a mapping (the client's own YAML reader: `yaml.safe_load`); None
    when it is not piped. `cluster/kubeconfig.py` has checked its text before any client reads it."""
    import yaml

    piped = piped_kubeconfig(path)
    return None if piped is None else yaml.safe_load(piped.decode("utf-8"))


def current_context(paths: str) -> str | None:
    """kubectl's rule for a merged $KUBECONFIG: the first file that sets current-context wins
    (kubectl config docs, "Merging kubeconfig files"); the Python client's merger takes a later one."""
    from kubernetes import config

    for p in paths.split(os.pathsep):
        f = Path(p).expanduser()
        piped = _piped_document(p) if p else None
        if isinstance(piped, dict) and piped.get("current-context"):
            return str(piped["current-context"])
        if not p or not f.is_file():
            continue
        try:
            _contexts, active = config.list_kube_config_contexts(config_file=str(f))  # type: ignore[no-untyped-call]
        except Exception:  # no current-context, or unreadable: the client reports a bad kubeconfig itself
            continue
        name = active.get("name") if isinstance(active, dict) else None
        if name:
            return str(name)
    return None


# client-go rest.InClusterConfig (k8s.io/client-go@v0.37.2 rest/config.go): the service's host variable and the
# ServiceAccount token the kubelet mounts at this path.
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def uses_in_cluster_credentials(kubeconfig: Path | str | None = None) -> bool:
    """Whether the tool runs in a pod on its ServiceAccount: no kubeconfig given or found (kubectl's order:
    --kubeconfig, $KUBECONFIG, ~/.kube/config), and what rest.InClusterConfig needs is there."""
    if kubeconfig is not None:
        return False
    paths = kubeconfig_paths(None)
    if any(Path(p).expanduser().exists() for p in paths.split(os.pathsep) if p):
        return False
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and SERVICE_ACCOUNT_TOKEN.is_file()


def new_api_client(
    kubeconfig: Path | str | None = None,
    user_agent: str = USER_AGENT,
    *,
    context: str | None = None,
    pool_size: int | None = None,
) -> Any:
    """An ApiClient (the `kubernetes` package's) for a kubeconfig, a context and a user agent.

    `pool_size`: connections kept open (the client's default is 5 per CPU). A thread that finds the pool
    empty opens a connection and drops it after one request: a TLS handshake per request."""
    from kubernetes import client

    cfg = client.Configuration()
    refresh = _Refresh(REFRESH_EVERY_S, time.monotonic)
    _load(cfg, kubeconfig, context)
    refresh.install(cfg)
    if pool_size is not None:
        cfg.connection_pool_maxsize = pool_size
    api = client.ApiClient(cfg)
    api.user_agent = user_agent
    setattr(api, REAUTH_ATTR, Reauthenticate(lambda: _reload(api, kubeconfig, context, refresh)))
    return api


def _load(cfg: Any, kubeconfig: Path | str | None, context: str | None) -> None:
    """Apply the kubeconfig (or the in-cluster service account) to `cfg`: server, TLS, credentials (an exec
    plugin is run, a token file read)."""
    import yaml
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    explicit = kubeconfig is not None
    paths = kubeconfig_paths(kubeconfig)
    failed = _PluginFailure()
    logging.getLogger().addFilter(failed)
    try:
        piped = _piped_document(paths) if explicit and os.pathsep not in paths else None
        if piped is not None:
            config.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
                piped, context=context or current_context(paths), client_configuration=cfg
            )
        elif explicit or any(Path(p).expanduser().exists() for p in paths.split(os.pathsep) if p):
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=paths, context=context or current_context(paths), client_configuration=cfg
            )
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        else:
            raise ClusterError(
                "no kubeconfig found (looked at $KUBECONFIG, ~/.kube/config and the in-cluster service account)",
                "pass --kubeconfig PATH or --snapshot PATH",
            )
    except ConfigException as e:
        raise ClusterError(f"cannot use kubeconfig {paths}: {e}", "check --kubeconfig and --context") from e
    except OSError as e:
        raise ClusterError(f"cannot read kubeconfig {paths}: {e.strerror}", "check --kubeconfig") from e
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, yaml.YAMLError) as e:
        # The client's loader on a file that is not a kubeconfig (a YAML scalar or list, a NUL byte, broken
        # YAML): `TypeError: 'str' object does not support item assignment` (kubernetes config/kube_config.py
        # KubeConfigMerger.load_config) read as an internal error. `cluster/kubeconfig.py` names the line or
        # key first on the commands' paths; this is the floor for every other client.
        raise ClusterError(
            f"cannot use kubeconfig {paths}: not a kubeconfig ({type(e).__name__}: {e})",
            "check --kubeconfig (kubectl config view --raw shows what kubectl reads)",
        ) from e
    finally:
        logging.getLogger().removeFilter(failed)
    if failed.messages:
        raise ClusterError(
            f"the credential plugin of kubeconfig {paths} failed: {failed.messages[0]}",
            _install_hint(paths, context)
            or "run the plugin's command by hand (kubectl config view shows it) and fix what it says",
        )


class _PluginFailure(logging.Filter):
    """Catches the Python client's report of a failed exec credential plugin while a kubeconfig is loaded.

    The client logs the failure (kube_config.py `_load_from_exec_plugin`: `logging.error(str(e))`) and goes on
    with no credentials, so every request went out anonymous and the server's 401, or its 403 for
    system:anonymous, pointed at RBAC instead of the plugin (gke-gcloud-auth-plugin not installed, an expired
    `aws sso` session). kubectl fails there, naming the executable and its installHint
    (k8s.io/client-go@v0.37.2 plugin/pkg/client/auth/exec/exec.go, `exec: executable %s not found`)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.funcName == "_load_from_exec_plugin" and record.levelno >= logging.ERROR:
            self.messages.append(record.getMessage())
            return False  # said once, in the error raised for it
        return True


def _install_hint(paths: str, context: str | None) -> str:
    """The exec plugin's `installHint` of the context's user, or "" (best effort: the error is raised anyway).
    Files of a $KUBECONFIG list are merged as kubectl merges them: the first to name a context or user wins."""
    import yaml

    contexts: dict[str, Any] = {}
    users: dict[str, Any] = {}
    try:
        for p in (p for p in paths.split(os.pathsep) if p):
            doc = _piped_document(p)
            if doc is None and Path(p).expanduser().is_file():
                doc = yaml.safe_load(Path(p).expanduser().read_text())
            if not isinstance(doc, dict):
                continue
            for c in doc.get("contexts") or []:
                contexts.setdefault(c["name"], c.get("context") or {})
            for u in doc.get("users") or []:
                users.setdefault(u["name"], u.get("user") or {})
        user = users[contexts[context or current_context(paths) or ""]["user"]]
        return str(user["exec"].get("installHint") or "")
    except Exception:
        return ""


def _reload(api: Any, kubeconfig: Path | str | None, context: str | None, refresh: _Refresh) -> None:
    """Read the credentials again after the server rejected them (401): the token file read again, the exec
    plugin run again, the in-cluster token re-read. A plugin that hands out a client certificate writes it to new
    files, which only a new connection pool presents."""
    cfg = api.configuration
    before = (cfg.cert_file, cfg.key_file)
    with refresh.mutex:
        cfg.refresh_api_key_hook = None  # what the new load sets, if anything, is the hook from now on
        _load(cfg, kubeconfig, context)
        refresh.install(cfg)
    if (cfg.cert_file, cfg.key_file) != before:
        from kubernetes.client import rest

        api.rest_client = rest.RESTClientObject(cfg)


# The kubernetes client runs its kubeconfig loader's refresh hook before every request, and the hook applies the
# whole kubeconfig again: its host setter reads every proxy variable of the environment (kubernetes 37
# client/configuration.py `host`), 13 % of a 2,000-node rehearsal's interpreter time (py-spy --gil). The loader
# renews a token only once it is within 5 minutes of its expiry (config/kube_config.py
# EXPIRY_SKEW_PREVENTION_DELAY; in a pod it re-reads the projected token each minute, config/incluster_config.py),
# so running the hook at most once a second keeps every credential as fresh as the loader would.
REFRESH_EVERY_S = 1.0


class _Refresh:
    """The kubeconfig loader's refresh hook, run on its first call and then at most once every `every_s` seconds
    (from any thread), and never twice at once: while it runs (an exec plugin can take seconds, kubelogin waits for
    a browser) other threads go on with the credentials they have instead of starting the plugin again.

    One per client configuration: `install` takes the hook a new load of the kubeconfig left (a reload after a
    401), so a thread holding the previous one cannot run the previous loader again and put its stale token back.
    """

    def __init__(self, every_s: float, clock: Callable[[], float]) -> None:
        self.every_s = every_s
        self.clock = clock
        self.hook: Callable[[Any], None] | None = None
        self.mutex = threading.Lock()  # held while the hook runs, and by `Reauthenticate` while it reloads
        self._last = float("-inf")

    def install(self, configuration: Any) -> None:
        """Wrap the hook the loader has just set (call with `mutex` held, or before any request)."""
        hook = configuration.refresh_api_key_hook
        if hook is self:
            return  # the hook ran and did not install itself again: it stays
        self.hook = hook
        if hook is not None:
            configuration.refresh_api_key_hook = self

    def __call__(self, configuration: Any) -> None:
        now = self.clock()
        if not self.mutex.acquire(blocking=False):
            return  # a refresh (or a reload) is under way: the current credentials serve meanwhile
        try:
            if self.hook is None or now - self._last < self.every_s:
                return
            self._last = now
            self.hook(configuration)
            # The kubeconfig loader's hook installs itself again each time it runs (kube_config.py `_set_config`).
            self.install(configuration)
        finally:
            self.mutex.release()


def throttled(
    hook: Callable[[Any], None], every_s: float = REFRESH_EVERY_S, clock: Callable[[], float] = time.monotonic
) -> Callable[[Any], None]:
    """`hook`, run on its first call and then at most once every `every_s` seconds (from any thread), never two
    runs at once (`_Refresh`)."""
    refresh = _Refresh(every_s, clock)
    refresh.hook = hook
    return refresh


def connect(
    kubeconfig: Path | str | None = None,
    context: str | None = None,
    *,
    retry: RetryPolicy = WRITE_RETRIES,
    rate_limit: RateLimit | None = None,
    user_agent: str = USER_AGENT,
    pool_size: int | None = None,
) -> Kube:
    """The client for a cluster: kubeconfig resolved as kubectl does, our user agent, the retry policy,
    and a rate limit (the defaults, DEFAULT_QPS/DEFAULT_BURST, unless one is given)."""
    api = new_api_client(kubeconfig, user_agent, context=context, pool_size=pool_size)
    return Kube(api, retry=retry, rate_limit=rate_limit if rate_limit is not None else RateLimit())
