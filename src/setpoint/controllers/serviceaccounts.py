"""Every namespace gets a ``default`` ServiceAccount and the ``kube-root-ca.crt`` ConfigMap.

Two ordinary controllers for Namespaces, as Kubernetes' serviceaccounts controller and
root-ca-cert-publisher work:

- :func:`service_account_controller` creates ``default`` in every active namespace, and
  again when someone deletes it;
- :func:`root_ca_controller` keeps a ConfigMap ``kube-root-ca.crt`` with the cluster CA
  (``ca.crt``) in every active namespace, so that workloads can verify the API server.

Invariants: nothing is created in a namespace being deleted; an existing object that is
already right is not written (no-op reconciles make no requests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import errors

NAMESPACE: Final = ("v1", "Namespace")
SERVICE_ACCOUNT: Final = ("v1", "ServiceAccount")
CONFIG_MAP: Final = ("v1", "ConfigMap")
DEFAULT_ACCOUNT: Final = "default"
ROOT_CA: Final = "kube-root-ca.crt"
ROOT_CA_DESCRIPTION: Final = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters.")


def _active(namespace: Mapping[str, Any] | None) -> bool:
    if namespace is None:
        return False
    meta = namespace.get("metadata") or {}
    phase = (namespace.get("status") or {}).get("phase")
    return not meta.get("deletionTimestamp") and phase != "Terminating"


def _to_namespace(name: str) -> runtime.handlers.Mapper:
    def mapper(obj: Mapping[str, Any]) -> Iterable[runtime.Request]:
        meta = obj.get("metadata") or {}
        if meta.get("name") == name and meta.get("namespace"):
            yield runtime.Request("", str(meta["namespace"]))
    return mapper


async def _ensure_default_account(request: runtime.Request,
                                  ctx: runtime.Context) -> runtime.Result:
    if not _active(ctx.get(request)):
        return runtime.Result.done()
    if ctx.cache_for(SERVICE_ACCOUNT).get(f"{request.name}/{DEFAULT_ACCOUNT}") is not None:
        return runtime.Result.done()
    try:
        await ctx.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                 "metadata": {"name": DEFAULT_ACCOUNT,
                                              "namespace": request.name}})
    except errors.AlreadyExists:
        pass
    except errors.Forbidden:
        pass  # the namespace began terminating meanwhile
    return runtime.Result.done()


def service_account_controller() -> runtime.Controller:
    return (runtime.Controller(for_=NAMESPACE, reconcile=_ensure_default_account,
                               name="serviceaccount")
            .watches(SERVICE_ACCOUNT, _to_namespace(DEFAULT_ACCOUNT)))


class RootCAPublisher:
    def __init__(self, ca_pem: str) -> None:
        self._data = {"ca.crt": ca_pem}

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        if not _active(ctx.get(request)):
            return runtime.Result.done()
        current = ctx.cache_for(CONFIG_MAP).get(f"{request.name}/{ROOT_CA}")
        try:
            if current is None:
                await ctx.client.create({
                    "apiVersion": "v1", "kind": "ConfigMap", "data": self._data,
                    "metadata": {"name": ROOT_CA, "namespace": request.name,
                                 "annotations": {"kubernetes.io/description":
                                                 ROOT_CA_DESCRIPTION}}})
            elif current.get("data") != self._data:
                await ctx.client.update({**current, "data": self._data}, resource=CONFIG_MAP)
        except (errors.AlreadyExists, errors.Conflict):
            return runtime.Result(requeue=True)
        except (errors.Forbidden, errors.NotFound):
            pass
        return runtime.Result.done()


def root_ca_controller(ca_pem: str) -> runtime.Controller:
    return (runtime.Controller(for_=NAMESPACE, reconcile=RootCAPublisher(ca_pem),
                               name="root-ca-cert-publisher")
            .watches(CONFIG_MAP, _to_namespace(ROOT_CA)))
