"""What a Validating- or MutatingWebhookConfiguration must satisfy to be stored, and its
defaults (Kubernetes' ``ValidateValidatingWebhookConfiguration`` and its mutating twin).

Defaults (``SetDefaults_ValidatingWebhook`` / ``..._MutatingWebhook``): ``failurePolicy:
Fail``, ``matchPolicy: Equivalent``, ``timeoutSeconds: 10``, empty ``namespaceSelector`` and
``objectSelector``, rule ``scope: "*"``, a service's ``port: 443``, and for mutating webhooks
``reinvocationPolicy: Never``.

Checks, with Kubernetes' messages: webhook names are qualified names (at least three
segments, ``should be a domain with at least three segments separated by dots``), unique in
their configuration; ``admissionReviewVersions`` required and including ``v1`` (the only
version this server speaks); ``sideEffects`` one of ``None``/``NoneOnDryRun``;
``timeoutSeconds`` in 1..30; ``clientConfig`` exactly one of ``url`` (``https`` only, no user
info, query or fragment) and ``service`` (namespace and name, a path beginning with ``/``,
port 1..65535); rules as for policies; ``matchConditions`` compiled (at most 64).

Invariant: validation never raises on any JSON value; defaulting only adds missing fields.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final
from urllib.parse import urlsplit

from setpoint.admission import expressions as ex
from setpoint.admission import validation as vap
from setpoint.apimachinery import fields
from setpoint.apimachinery import validation as names
from setpoint.apimachinery.fields import FieldError, FieldPath

SIDE_EFFECTS: Final = ("None", "NoneOnDryRun")
REINVOCATION: Final = ("Never", "IfNeeded")
REVIEW_VERSIONS: Final = ("v1",)
DEFAULT_TIMEOUT: Final = 10
MAX_TIMEOUT: Final = 30
#: the conditions of a webhook see ``object``, ``oldObject``, ``request`` and ``authorizer``
CONDITIONS: Final = ex.Declarations(has_params=False)


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _webhooks(obj: Any) -> list[Any]:
    hooks = obj.get("webhooks") if isinstance(obj, dict) else None
    return hooks if isinstance(hooks, list) else []


def default_configuration(obj: dict[str, Any], *, mutating: bool) -> None:
    for hook in _webhooks(obj):
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", DEFAULT_TIMEOUT)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in _list(hook.get("rules")):
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        config = _dict(hook.get("clientConfig")) or {}
        service = config.get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)


def _validate_url(url: Any, path: FieldPath, errs: list[FieldError]) -> None:
    if not isinstance(url, str) or not url:
        errs.append(fields.required(path, "host must be specified"))
        return
    try:
        parts = urlsplit(url)
    except ValueError as e:
        errs.append(fields.invalid(path, url, f"url must be a valid URL: {e}"))
        return
    if parts.scheme != "https":
        errs.append(fields.invalid(path, parts.scheme, "'https' is the only allowed URL scheme"))
    if not parts.hostname:
        errs.append(fields.invalid(path, url, "host must be specified"))
    if parts.username is not None or parts.password is not None:
        errs.append(fields.invalid(path, "<omitted>", "user information is not permitted "
                                                      "in the URL"))
    if parts.fragment or url.endswith("#"):
        errs.append(fields.invalid(path, parts.fragment, "fragments are not permitted in "
                                                         "the URL"))
    if parts.query or "?" in url:
        errs.append(fields.invalid(path, parts.query, "query parameters are not permitted "
                                                      "in the URL"))


def _validate_service(service: dict[str, Any], path: FieldPath,
                      errs: list[FieldError]) -> None:
    for key in ("namespace", "name"):
        value = service.get(key)
        if not isinstance(value, str) or not value:
            errs.append(fields.required(path.child(key), f"service {key} is required"))
        else:
            for msg in names.is_dns1123_subdomain(value) if key == "name" \
                    else names.is_dns1123_label(value):
                errs.append(fields.invalid(path.child(key), value, msg))
    svc_path = service.get("path")
    if svc_path is not None:
        if not isinstance(svc_path, str) or not svc_path.startswith("/"):
            errs.append(fields.invalid(path.child("path"), svc_path,
                                       "must start with a '/'"))
        elif "?" in svc_path or "#" in svc_path or "//" in svc_path:
            errs.append(fields.invalid(path.child("path"), svc_path,
                                       "segment[1] may not be empty" if "//" in svc_path
                                       else "must not contain a query or fragment"))
    port = service.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        errs.append(fields.invalid(path.child("port"), port,
                                   "port is not valid: must be between 1 and 65535, "
                                   "inclusive"))


def _validate_client_config(config: Any, path: FieldPath, errs: list[FieldError]) -> None:
    if not isinstance(config, dict):
        errs.append(fields.required(path))
        return
    url, service = config.get("url"), config.get("service")
    if (url is not None and service is not None) or (url is None and service is None):
        errs.append(fields.required(path, "exactly one of url or service is required"))
    elif url is not None:
        _validate_url(url, path.child("url"), errs)
    elif isinstance(service, dict):
        _validate_service(service, path.child("service"), errs)
    else:
        errs.append(fields.type_invalid(path.child("service"), service, "must be an object"))
    bundle = config.get("caBundle")
    if bundle is not None:
        try:
            if not isinstance(bundle, str):
                raise ValueError
            base64.b64decode(bundle, validate=True)
        except (ValueError, binascii.Error):
            errs.append(fields.type_invalid(path.child("caBundle"), bundle,
                                            "must be base64 encoded PEM certificates"))


def validate_client_config(config: Any, path: FieldPath) -> list[FieldError]:
    """A webhook ``clientConfig`` (admission webhooks', CRD conversion webhooks')."""
    errs: list[FieldError] = []
    _validate_client_config(config, path, errs)
    return errs


def _validate_webhook(hook: Any, path: FieldPath, mutating: bool,
                      errs: list[FieldError]) -> None:
    if not isinstance(hook, dict):
        errs.append(fields.type_invalid(path, hook, "must be an object"))
        return
    name = hook.get("name")
    if not isinstance(name, str) or not name:
        errs.append(fields.required(path.child("name")))
    else:
        for msg in names.is_dns1123_subdomain(name):
            errs.append(fields.invalid(path.child("name"), name, msg))
        if len(name.split(".")) < 3:
            errs.append(fields.invalid(path.child("name"), name,
                                       "should be a domain with at least three segments "
                                       "separated by dots"))
    for i, rule in enumerate(_list(hook.get("rules"))):
        vap._validate_rule(rule, path.child("rules").index(i), errs)
    failure = hook.get("failurePolicy")
    if failure not in vap.FAILURE_POLICIES:
        errs.append(fields.not_supported(path.child("failurePolicy"), failure,
                                         vap.FAILURE_POLICIES))
    match = hook.get("matchPolicy")
    if match not in vap.MATCH_POLICIES:
        errs.append(fields.not_supported(path.child("matchPolicy"), match, vap.MATCH_POLICIES))
    side = hook.get("sideEffects")
    if side is None:
        errs.append(fields.required(path.child("sideEffects"),
                                    "must specify one of None, NoneOnDryRun"))
    elif side not in SIDE_EFFECTS:
        errs.append(fields.not_supported(path.child("sideEffects"), side, SIDE_EFFECTS))
    versions = hook.get("admissionReviewVersions")
    vpath = path.child("admissionReviewVersions")
    if not isinstance(versions, list) or not versions:
        errs.append(fields.required(vpath, "must specify one of v1"))
    elif not all(isinstance(v, str) for v in versions):
        errs.append(fields.type_invalid(vpath, versions, "must be a list of strings"))
    else:
        seen: set[str] = set()
        for i, v in enumerate(versions):
            if v in seen:
                errs.append(fields.duplicate(vpath.index(i), v))
            seen.add(v)
        if not any(v in REVIEW_VERSIONS for v in versions):
            errs.append(fields.invalid(vpath, versions, "must include at least one of v1"))
    timeout = hook.get("timeoutSeconds")
    if not isinstance(timeout, int) or isinstance(timeout, bool) \
            or not 1 <= timeout <= MAX_TIMEOUT:
        errs.append(fields.invalid(path.child("timeoutSeconds"), timeout,
                                   "the timeout value must be between 1 and 30 seconds"))
    if mutating:
        policy = hook.get("reinvocationPolicy")
        if policy not in REINVOCATION:
            errs.append(fields.not_supported(path.child("reinvocationPolicy"), policy,
                                             REINVOCATION))
    for key in ("namespaceSelector", "objectSelector"):
        vap._validate_selector(hook.get(key), path.child(key), errs)
    _validate_client_config(hook.get("clientConfig"), path.child("clientConfig"), errs)
    vap._validate_match_conditions(hook.get("matchConditions"), CONDITIONS,
                                   path.child("matchConditions"), errs)


def validate_configuration(obj: dict[str, Any], *, mutating: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    hooks = obj.get("webhooks")
    if hooks is not None and not isinstance(hooks, list):
        return [fields.type_invalid("webhooks", hooks, "must be a list")]
    seen: set[str] = set()
    for i, hook in enumerate(_webhooks(obj)):
        at = FieldPath.root("webhooks").index(i)
        _validate_webhook(hook, at, mutating, errs)
        name = hook.get("name") if isinstance(hook, dict) else None
        if isinstance(name, str) and name:
            if name in seen:
                errs.append(fields.duplicate(at.child("name"), name))
            seen.add(name)
    return errs
