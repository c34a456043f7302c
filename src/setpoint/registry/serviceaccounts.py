"""core/v1 ServiceAccount, and its ``token`` subresource (TokenRequest).

``POST .../serviceaccounts/<name>/token`` with an ``authentication.k8s.io/v1`` TokenRequest
returns a signed token for the account (``kubectl create token NAME``): audiences default to
the API server's, expiry to an hour (at least 10 minutes, at most 2^32 seconds), and a
``boundObjectRef`` to a Pod, Secret or Node ties the token's life to that object.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from setpoint.apimachinery import errors, fields, timeutil
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.auth import jwt, serviceaccounts
from setpoint.registry import table
from setpoint.registry.resources import ResourceInfo, SubresourceInfo, VersionInfo
from setpoint.registry.strategy import Strategy

Obj = dict[str, Any]

#: the uid of a live object by (kind, namespace, name), or None
UidLookup = Callable[[str, str, str], str | None]

MAX_EXPIRATION = 2**32
BOUND_KINDS = ("Pod", "Secret", "Node")


class ServiceAccountStrategy(Strategy):
    known_fields = frozenset({"secrets", "imagePullSecrets", "automountServiceAccountToken"})

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        for name in ("secrets", "imagePullSecrets"):
            value = obj.get(name)
            if value is not None and (not isinstance(value, list) or not all(
                    isinstance(v, dict) for v in value)):
                errs.append(fields.type_invalid(name, value, "must be a list of objects"))
        automount = obj.get("automountServiceAccountToken")
        if automount is not None and not isinstance(automount, bool):
            errs.append(fields.type_invalid("automountServiceAccountToken", automount,
                                            "must be a boolean"))
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.Column("Secrets", "integer", lambda o, _n: len(o.get("secrets") or [])),
                table.age_column()]


def service_account_resource() -> tuple[ResourceInfo, type[Strategy]]:
    return (ResourceInfo(group="", resource="serviceaccounts", kind="ServiceAccount",
                         singular="serviceaccount", namespaced=True,
                         versions=(VersionInfo("v1", storage=True),), short_names=("sa",),
                         extra_subresources=(SubresourceInfo(
                             "token", ("create",), "TokenRequest", "authentication.k8s.io",
                             "v1"),)),
            ServiceAccountStrategy)


def create_token(account: Obj, body: Any, *, signer: jwt.Signer, issuer: str,
                 api_audiences: Sequence[str], now: float, lookup: UidLookup) -> Obj:
    """The TokenRequest response for ``account`` (the stored ServiceAccount)."""
    meta = account.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    if not isinstance(body, dict):
        raise errors.BadRequest("the body must be a TokenRequest object")
    if body.get("kind") not in (None, "TokenRequest") or body.get("apiVersion") not in (
            None, "authentication.k8s.io/v1"):
        raise errors.BadRequest("the body must be an authentication.k8s.io/v1 TokenRequest")
    spec = body.get("spec")
    if spec is None:
        spec = {}
    errs: list[FieldError] = []
    path = FieldPath.root("spec")
    if not isinstance(spec, dict):
        raise errors.invalid("TokenRequest", "authentication.k8s.io", name,
                             [fields.type_invalid(path, spec, "must be an object")])
    audiences = spec.get("audiences") or list(api_audiences)
    if not isinstance(audiences, list) or not all(isinstance(a, str) and a for a in audiences):
        errs.append(fields.type_invalid(path.child("audiences"), audiences,
                                        "must be a list of non-empty strings"))
    expiration = spec.get("expirationSeconds", serviceaccounts.DEFAULT_EXPIRATION)
    if expiration is None:
        expiration = serviceaccounts.DEFAULT_EXPIRATION
    if not isinstance(expiration, int) or isinstance(expiration, bool):
        errs.append(fields.type_invalid(path.child("expirationSeconds"), expiration,
                                        "must be an integer"))
    elif expiration < serviceaccounts.MIN_EXPIRATION:
        errs.append(fields.invalid(path.child("expirationSeconds"), expiration,
                                   "may not specify a duration less than 10 minutes"))
    elif expiration > MAX_EXPIRATION:
        errs.append(fields.invalid(path.child("expirationSeconds"), expiration,
                                   "may not specify a duration larger than 2^32 seconds"))
    bound = _bound_object(spec.get("boundObjectRef"), path.child("boundObjectRef"), errs,
                          namespace, lookup, name)
    if errs:
        raise errors.invalid("TokenRequest", "authentication.k8s.io", name, errs)
    request = serviceaccounts.TokenRequest(
        namespace=namespace, name=name, uid=str(meta.get("uid", "")),
        audiences=tuple(audiences), expiration_seconds=expiration, bound=bound)
    issued = int(now)
    token = signer.sign(serviceaccounts.claims_for(request, issuer=issuer, now=issued))
    out_spec: Obj = {"audiences": list(audiences), "expirationSeconds": expiration,
                     "boundObjectRef": spec.get("boundObjectRef")}
    return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace,
                         "creationTimestamp": _stamp(issued)},
            "spec": out_spec,
            "status": {"token": token,
                       "expirationTimestamp": _stamp(issued + expiration)}}


def _stamp(seconds: int) -> str:
    return timeutil.format_time(datetime.fromtimestamp(seconds, UTC))


def _bound_object(ref: Any, path: FieldPath, errs: list[FieldError], namespace: str,
                  lookup: UidLookup, name: str) -> serviceaccounts.BoundObject | None:
    if ref is None:
        return None
    if not isinstance(ref, dict):
        errs.append(fields.type_invalid(path, ref, "must be an object"))
        return None
    kind = ref.get("kind")
    if kind not in BOUND_KINDS:
        errs.append(fields.not_supported(path.child("kind"), kind, BOUND_KINDS))
        return None
    if ref.get("apiVersion", "v1") != "v1":
        errs.append(fields.not_supported(path.child("apiVersion"), ref.get("apiVersion"),
                                         ["v1"]))
    obj_name = ref.get("name")
    if not isinstance(obj_name, str) or not obj_name:
        errs.append(fields.required(path.child("name"), ""))
        return None
    live = lookup(kind, "" if kind == "Node" else namespace, obj_name)
    if live is None:
        raise errors.not_found(f"{kind.lower()}s", "", obj_name)
    uid = ref.get("uid")
    if uid and uid != live:
        raise errors.conflict("serviceaccounts", "", name,
                              f"the UID in the bound object reference ({uid}) does not match "
                              "the UID in record. The object might have been deleted and then "
                              "recreated")
    return serviceaccounts.BoundObject(kind, obj_name, live)
