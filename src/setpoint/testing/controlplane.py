"""A control plane in the test's own event loop, and operators run beside it.

:func:`control_plane` starts a setpoint API server in-process (port 0, memory storage by
default, or SQLite in the test's directory), writes an admin kubeconfig, and yields a
:class:`ControlPlane`: a connected client, the kubeconfig's path, the URL, and helpers to
install manifests, run operators and wait for the world to converge. ::

    async with control_plane() as cp:
        await cp.apply("examples/book/crd.yaml")          # waits until the CRD is Established
        await cp.run_operator("examples/book/operator.py")
        await cp.apply({"apiVersion": "library.example.com/v1", "kind": "Book", ...})
        book = await cp.wait_for(("library.example.com/v1", "Book"), "dune",
                                 lambda b: b.get("status", {}).get("phase") == "Catalogued")

It is what envtest is to controller-runtime, without binaries: the server is the same code
``setpoint serve`` runs, so operators meet real discovery, watches, schemas, status
subresources, finalizers and Events. Starting takes a few tens of milliseconds
(:attr:`ControlPlane.startup_seconds`).

Invariants:

- Everything started here is stopped when the ``async with`` block exits, in reverse order:
  operators first (gracefully, then cancelled after ``graceful_shutdown_timeout``), then the
  clients, then the server and its storage, then the temporary directory if one was made.
  No task started here outlives the block.
- An operator that fails **before** it is ready makes :meth:`ControlPlane.run_operator`
  raise that failure. One that fails **later** is re-raised by the next
  :meth:`ControlPlane.wait_for` / :meth:`ControlPlane.wait_deleted` /
  :meth:`ControlPlane.check_operators`, and at the latest when the block exits (unless the
  block is already raising: then it is logged, and the block's own exception wins).
- Each operator gets its own client (its own connection pool), as a separate process would.
- Nothing is global: two control planes in one process are independent.

The server runs the built-in controllers, as ``setpoint serve`` does (the garbage collector,
the namespace lifecycle and CRD cleanup, see :mod:`setpoint.controlplane`), here in the
test's own event loop (``setpoint serve`` runs them in a child process by default): owned
objects are garbage-collected, deleted namespaces are emptied. ``control_plane(controllers=())``
starts none, as envtest does (then Foreground and Orphan deletes delete at once, namespaces
and CRDs being deleted stay Terminating).

By default there is no authentication (the kubeconfig is an admin's, over plain HTTP), which
is fastest. ``control_plane(secure=True)`` serves as ``setpoint serve`` does, with TLS,
client certificates and RBAC, so that an operator's own permissions can be tested::

    async with control_plane(secure=True) as cp:
        await cp.apply("deploy/rbac.yaml")               # the operator's Role and binding
        await cp.run_operator(operator, service_account="shop/operator")
        # the operator now gets 403 for anything its role does not grant
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, overload

import yaml

from setpoint import client as sp_client
from setpoint import controlplane as sp_controlplane
from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.cli import run as run_cli
from setpoint.client import api as client_api
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import waiting

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
Manifest = Mapping[str, Any] | Sequence[Mapping[str, Any]] | str | os.PathLike[str]
OperatorTarget = (runtime.Registry | runtime.Controller | Iterable[runtime.Controller]
                  | ModuleType | str | os.PathLike[str])
Storage = Literal["memory", "sqlite"]

#: how long the helpers wait by default, in seconds: the one default of
#: :mod:`setpoint.testing.waiting` (a wait ends as soon as its condition holds, so this only
#: bounds a failing test; a loaded machine is slow, never wrong)
DEFAULT_TIMEOUT = waiting.DEFAULT_TIMEOUT
#: operators stop faster than in production, so that tests end quickly
TEST_SHUTDOWN_TIMEOUT = 5.0
_POLL = 0.01

CRD_API_GROUP = "apiextensions.k8s.io"


class OperatorFailedError(RuntimeError):
    """An operator run by the control plane stopped with an error (it is the ``__cause__``)."""


def read_manifests(manifest: Manifest) -> list[Obj]:
    """The objects a manifest holds, in order.

    ``manifest`` is one object, a sequence of objects, a path to a YAML or JSON file (one or
    several ``---``-separated documents), or YAML text (a ``str`` containing a newline).
    Empty documents are skipped; ``kind: List`` documents contribute their ``items``.
    """
    docs: list[Any]
    if isinstance(manifest, Mapping):
        docs = [manifest]
    elif isinstance(manifest, str) and "\n" in manifest:
        docs = list(yaml.safe_load_all(manifest))
    elif isinstance(manifest, str | os.PathLike):
        docs = list(yaml.safe_load_all(Path(manifest).read_text()))
    else:
        docs = list(manifest)
    out: list[Obj] = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise ValueError(f"a manifest document must be an object, not {type(doc).__name__}")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"),
                                                                             list):
            out.extend(read_manifests(doc["items"]))
        else:
            out.append(dict(doc))
    return out


def load_operator(target: str | os.PathLike[str]) -> ModuleType:
    """Import an operator file (each call executes it afresh) or a module, by name.

    The file's directory is not added to ``sys.path``: tests stay independent of each other.
    """
    return run_cli.load_target(target, add_to_path=False)


def operator_controllers(target: OperatorTarget) -> list[runtime.Controller]:
    """The controllers a registry, controller, iterable, module, file or module name holds."""
    if isinstance(target, str | os.PathLike):
        target = load_operator(target)
    if isinstance(target, ModuleType):
        return run_cli.controllers_of(target)
    if isinstance(target, runtime.Controller):
        return [target]
    found = list(target)
    if not found:
        raise ValueError(f"no controllers in {target!r}")
    return found


def _is_crd(obj: Mapping[str, Any]) -> bool:
    api_version = str(obj.get("apiVersion", ""))
    return (obj.get("kind") == "CustomResourceDefinition"
            and api_version.split("/", 1)[0] == CRD_API_GROUP)


def _merge_body(obj: Mapping[str, Any]) -> Obj:
    """``obj`` as a merge patch: no resourceVersion precondition, no server-owned fields."""
    body = dict(obj)
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items()
                if k not in ("resourceVersion", "uid", "creationTimestamp", "generation",
                             "managedFields")}
    body["metadata"] = metadata
    body.pop("status", None)
    return body


@dataclass(eq=False)
class _Operator:
    manager: runtime.Manager
    client: sp_client.Client
    task: asyncio.Task[None] | None = None
    #: run_operator is still waiting for readiness: a failure goes to it
    starting: bool = True
    error: Exception | None = None
    reported: bool = False
    name: str = field(default="operator")


class ControlPlane:
    """A running in-process control plane; see the module docstring. Made by
    :func:`control_plane`, never directly."""

    def __init__(self, server: Server, client: sp_client.Client, kubeconfig: Path,
                 startup_seconds: float) -> None:
        self.server = server
        #: a client connected as an admin (closed when the block exits)
        self.client = client
        #: the admin kubeconfig file (for kubectl, subprocesses, other clients)
        self.kubeconfig = kubeconfig
        #: seconds from the call to ``control_plane`` to the first answered request
        self.startup_seconds = startup_seconds
        self._operators: list[_Operator] = []
        self._clients: list[sp_client.Client] = []

    @property
    def url(self) -> str:
        """The server's base URL (``http://127.0.0.1:<port>``)."""
        return self.server.url

    def new_client(self, **overrides: Any) -> sp_client.Client:
        """Another client for this server (closed when the block exits);
        ``overrides`` replace :class:`~setpoint.client.ClientConfig` fields."""
        client = sp_client.Client(sp_client.load_kubeconfig(self.kubeconfig, **overrides))
        self._clients.append(client)
        return client

    # --- manifests ------------------------------------------------------------------------

    @overload
    async def apply(self, manifest: Mapping[str, Any], *,
                    timeout: float = DEFAULT_TIMEOUT) -> Obj: ...

    @overload
    async def apply(self, manifest: Sequence[Mapping[str, Any]] | str | os.PathLike[str], *,
                    timeout: float = DEFAULT_TIMEOUT) -> list[Obj]: ...

    async def apply(self, manifest: Manifest, *,
                    timeout: float = DEFAULT_TIMEOUT) -> Obj | list[Obj]:
        """Create each object, or merge-patch it when it exists; returns what was stored.

        One object in, one object out; otherwise a list, in order. A CustomResourceDefinition
        is waited for until it is ``Established`` and its kinds resolve through discovery,
        so a later document (or call) can use them at once. Existing objects keep the fields
        the manifest does not mention (finalizers added by an operator, for one); ``status``
        and server-owned metadata in the manifest are ignored on update.
        """
        stored = [await self._apply_one(obj, timeout) for obj in read_manifests(manifest)]
        if isinstance(manifest, Mapping):
            return stored[0]
        return stored

    async def _apply_one(self, obj: Obj, timeout: float) -> Obj:
        ref = await self.client.resolve(_resource(obj))
        name, namespace = _name(obj), (obj.get("metadata") or {}).get("namespace")
        stored: Obj | None = None
        try:
            await self.client.get(ref, name, namespace=namespace)
        except errors.NotFound:
            try:
                stored = await self.client.create(obj, resource=ref)
            except errors.AlreadyExists:  # created meanwhile: update it
                pass
        if stored is None:
            stored = await self.client.patch(ref, name, _merge_body(obj), namespace=namespace)
        if _is_crd(obj):
            await self._wait_established(stored, timeout)
        return stored

    async def _wait_established(self, crd: Mapping[str, Any], timeout: float) -> None:
        name = crd["metadata"]["name"]
        spec = crd.get("spec") or {}
        established = await self.wait_for(
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition"), name,
            lambda c: runtime.is_true(c, "Established"), timeout=timeout)
        self.client.discovery.invalidate()
        kind = str((spec.get("names") or {}).get("kind"))
        versions = [v["name"] for v in spec.get("versions") or () if v.get("served", True)]
        if not versions and spec.get("version"):  # v1beta1's single version
            versions = [spec["version"]]
        async with asyncio.timeout(timeout):
            for version in versions:
                while True:
                    try:
                        await self.client.discovery.resolve(f"{spec['group']}/{version}", kind)
                        break
                    except sp_client.NoMatchError:
                        await asyncio.sleep(_POLL)
        logger.debug("CRD %s established (resourceVersion %s)", name,
                     established["metadata"].get("resourceVersion"))

    async def delete(self, manifest: Manifest, *, wait: bool = True,
                     timeout: float = DEFAULT_TIMEOUT) -> None:
        """Delete what ``manifest`` names (missing objects are fine), in reverse order;
        with ``wait``, until each is gone (its finalizers have run)."""
        for obj in reversed(read_manifests(manifest)):
            ref = await self.client.resolve(_resource(obj))
            name = _name(obj)
            namespace = (obj.get("metadata") or {}).get("namespace")
            try:
                await self.client.delete(ref, name, namespace=namespace)
            except errors.NotFound:
                continue
            if wait:
                await self.wait_deleted(ref, name, namespace=namespace, timeout=timeout)

    # --- waiting --------------------------------------------------------------------------

    async def wait_for(self, resource: client_api.ResourceLike, name: str,
                       condition: Callable[[Obj], bool] | None = None, *,
                       namespace: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> Obj:
        """Poll until the object exists and ``condition(obj)`` holds; returns it.

        Raises ``TimeoutError`` (with the last object seen) after ``timeout`` seconds, and
        :class:`OperatorFailedError` as soon as an operator run here has failed.
        """
        last: Obj | None = None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self.check_operators()
                    try:
                        last = await self.client.get(resource, name, namespace=namespace)
                    except errors.NotFound:
                        last = None
                    if last is not None and (condition is None or condition(last)):
                        return last
                    await asyncio.sleep(_POLL)
        except TimeoutError as e:
            raise TimeoutError(f"{resource!r} {name!r}: condition not met within {timeout:g}s; "
                               f"last seen: {last!r}") from e

    async def wait_deleted(self, resource: client_api.ResourceLike, name: str, *,
                           namespace: str | None = None,
                           timeout: float = DEFAULT_TIMEOUT) -> None:
        """Poll until the object does not exist (any finalizers have been removed)."""
        last: Obj | None = None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self.check_operators()
                    try:
                        last = await self.client.get(resource, name, namespace=namespace)
                    except errors.NotFound:
                        return
                    await asyncio.sleep(_POLL)
        except TimeoutError as e:
            raise TimeoutError(f"{resource!r} {name!r} still exists after {timeout:g}s: "
                               f"{last!r}") from e

    async def eventually(self, check: Callable[[], Awaitable[bool] | bool], *,
                         timeout: float = DEFAULT_TIMEOUT) -> None:
        """Poll ``check()`` (sync or async) until it is true; ``TimeoutError`` after
        ``timeout`` seconds, :class:`OperatorFailedError` when an operator fails."""
        async with asyncio.timeout(timeout):
            while True:
                self.check_operators()
                result = check()
                if not isinstance(result, bool):
                    result = await result
                if result:
                    return
                await asyncio.sleep(_POLL)

    # --- operators ------------------------------------------------------------------------

    async def service_account_kubeconfig(self, service_account: str, *,
                                         expiration_seconds: int = 3600) -> Path:
        """A kubeconfig acting as ServiceAccount ``namespace/name`` (created if missing),
        with a token the server signed. Needs ``control_plane(secure=True)``: without
        authentication every client is an administrator."""
        if self.server.config.security is None:
            raise RuntimeError("service account identities need control_plane(secure=True)")
        namespace, sep, name = service_account.partition("/")
        if not sep or not namespace or not name:
            raise ValueError(f"service_account is 'namespace/name', not {service_account!r}")
        try:
            await self.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                      "metadata": {"name": name, "namespace": namespace}})
        except errors.AlreadyExists:
            pass
        answer = await self.client.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": {"expirationSeconds": expiration_seconds}})
        admin = yaml.safe_load(self.kubeconfig.read_text())
        config = {**admin, "users": [{"name": service_account,
                                      "user": {"token": answer["status"]["token"]}}],
                  "contexts": [{"name": "setpoint", "context": {
                      "cluster": "setpoint", "user": service_account,
                      "namespace": namespace}}]}
        path = self.kubeconfig.with_name(f"{namespace}-{name}.kubeconfig")
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    async def run_operator(self, target: OperatorTarget, *, wait_ready: bool = True,
                           timeout: float = DEFAULT_TIMEOUT,
                           service_account: str | None = None,
                           **manager_options: Any) -> runtime.Manager:
        """Run an operator's controllers in a :class:`~setpoint.runtime.Manager`, in this
        event loop, until :meth:`stop_operator` or the end of the block; returns the manager.

        ``target`` is a :class:`~setpoint.runtime.Registry`, a
        :class:`~setpoint.runtime.Controller` or several, a module, or a file path or module
        name to import (see :func:`load_operator`). With ``wait_ready``, returns once every
        cache has synced (at most ``timeout`` seconds, also the manager's cache sync
        timeout, by default). ``service_account`` (``"namespace/name"``, with
        ``control_plane(secure=True)``) runs it as that account, so that RBAC applies to it;
        otherwise it acts as the admin. ``manager_options`` go to the ``Manager`` (e.g.
        ``leader_election``, ``health_port=0``, ``clock``); a module's global ``budgets``
        is passed as ``budgets`` unless given, and its :class:`~setpoint.runtime.Hooks` are
        served as ``runnables`` (``wait_ready`` then also waits until they are registered),
        as ``setpoint run`` does.
        """
        if isinstance(target, str | os.PathLike):
            target = load_operator(target)
        if isinstance(target, ModuleType) and "budgets" not in manager_options:
            manager_options["budgets"] = run_cli.budgets_of(target)
        hooks: list[runtime.Hooks] = []
        if isinstance(target, ModuleType) and "runnables" not in manager_options:
            hooks = run_cli.hooks_of(target)
            manager_options["runnables"] = hooks
        controllers = operator_controllers(target)
        manager_options.setdefault("cache_sync_timeout", timeout)
        manager_options.setdefault("graceful_shutdown_timeout", TEST_SHUTDOWN_TIMEOUT)
        kubeconfig = self.kubeconfig if service_account is None else \
            await self.service_account_kubeconfig(service_account)
        client = sp_client.Client(sp_client.load_kubeconfig(kubeconfig))
        try:
            manager = runtime.Manager(client, controllers, **manager_options)
        except BaseException:
            await client.close()
            raise
        op = _Operator(manager, client, name=", ".join(repr(c) for c in controllers))
        op.task = asyncio.get_running_loop().create_task(self._supervise(op),
                                                          name=f"operator {op.name}")
        self._operators.append(op)
        if not wait_ready:
            op.starting = False
            return manager
        try:
            async with asyncio.timeout(timeout + 1):
                while not manager.ready or not all(h.registered.is_set() for h in hooks):
                    if op.task.done():
                        break
                    await asyncio.sleep(_POLL)
        finally:
            op.starting = False
        if op.task.done() and op.error is not None:
            op.reported = True
            self._operators.remove(op)
            raise op.error
        return manager

    async def _supervise(self, op: _Operator) -> None:
        try:
            await op.manager.run()
        except Exception as e:
            op.error = e
            if not op.starting:
                logger.error("operator %s failed: %r", op.name, e)
        finally:
            await op.client.close()

    def check_operators(self) -> None:
        """Raise :class:`OperatorFailedError` if an operator run here has failed (once)."""
        for op in self._operators:
            if op.error is not None and not op.reported and not op.starting:
                op.reported = True
                raise OperatorFailedError(f"operator {op.name} failed: {op.error!r}") \
                    from op.error

    async def stop_operator(self, manager: runtime.Manager) -> None:
        """Stop one operator gracefully and wait for it; raises its failure, if any."""
        for op in list(self._operators):
            if op.manager is manager:
                await self._stop([op])
                self._operators.remove(op)
                if op.error is not None and not op.reported:
                    op.reported = True
                    raise OperatorFailedError(f"operator {op.name} failed: {op.error!r}") \
                        from op.error
                return
        raise ValueError("that manager was not started by this control plane")

    async def _stop(self, ops: Sequence[_Operator]) -> None:
        tasks = {op.task for op in ops if op.task is not None}
        for op in ops:
            op.manager.stop()
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=TEST_SHUTDOWN_TIMEOUT + 5)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    async def _close(self) -> list[Exception]:
        """Stop everything started here; the operator failures nobody was told about."""
        ops, self._operators = self._operators, []
        try:
            await self._stop(ops)
        finally:
            for client in self._clients:
                await client.close()
            self._clients.clear()
        return [op.error for op in ops if op.error is not None and not op.reported]


def _name(obj: Mapping[str, Any]) -> str:
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"a manifest object needs metadata.name: {obj!r}")
    return name


def _resource(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(apiVersion, kind)`` of a manifest object."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not (isinstance(api_version, str) and isinstance(kind, str)):
        raise ValueError(f"a manifest object needs apiVersion and kind: {obj!r}")
    return api_version, kind


@contextlib.asynccontextmanager
async def control_plane(tmp_path: str | os.PathLike[str] | None = None,
                        storage: Storage = "memory",
                        controllers: Iterable[str] | None = None,
                        secure: bool = False) -> AsyncIterator[ControlPlane]:
    """Start a control plane for the block; see the module docstring.

    ``tmp_path`` holds the kubeconfig (and ``state.db`` for ``storage="sqlite"``, and the CA
    and keys with ``secure``); without it a temporary directory is made and removed
    afterwards. ``controllers`` names the built-in controllers to run (None: all of them).
    ``secure`` serves TLS with authentication and RBAC, as ``setpoint serve`` does.
    """
    if storage not in ("memory", "sqlite"):
        raise ValueError(f"storage is 'memory' or 'sqlite', not {storage!r}")
    started = time.perf_counter()
    async with contextlib.AsyncExitStack() as stack:
        if tmp_path is None:
            directory = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix="setpoint-testing-")))
        else:
            directory = Path(tmp_path)
            directory.mkdir(parents=True, exist_ok=True)
        kubeconfig = directory / "kubeconfig"
        storage_config = (StorageConfig(kind="sqlite", path=directory / "state.db")
                          if storage == "sqlite" else StorageConfig(kind="memory"))
        plane = await stack.enter_async_context(sp_controlplane.ControlPlane(
            sp_controlplane.ControlPlaneConfig(
                server=ServerConfig(port=0, storage=storage_config, kubeconfig_path=kubeconfig,
                                    security=SecurityConfig(pki_dir=directory / "pki")
                                    if secure else None),
                controllers=frozenset(sp_controlplane.DEFAULT_CONTROLLERS) if controllers is None
                else sp_controlplane.parse_controllers(",".join(controllers)))))
        server = plane.server
        client = await stack.enter_async_context(
            sp_client.Client(sp_client.load_kubeconfig(kubeconfig)))
        await client.version()
        cp = ControlPlane(server, client, kubeconfig, time.perf_counter() - started)
        logger.debug("control plane at %s ready in %.3fs", server.url, cp.startup_seconds)
        failed: list[Exception] = []
        try:
            yield cp
        except BaseException:
            for error in await cp._close():
                logger.error("operator failed while the block was raising: %r", error)
            raise
        else:
            failed = await cp._close()
        if len(failed) == 1:
            raise OperatorFailedError(f"an operator failed: {failed[0]!r}") from failed[0]
        if failed:
            raise ExceptionGroup("operators failed", failed)
