"""Audit events (``audit.k8s.io/v1`` ``Event``), built stage by stage for one request.

An :class:`AuditRecord` lives as long as its request: it is created when the request has
been authenticated, gets the authorization decision, the request object (at ``Request`` level
and above) and the response (status always; the object at ``RequestResponse``), and yields
one event per stage that the policy does not omit.

Invariants: every event of one request shares its ``auditID``; objects are included only at
the levels that allow them; with ``omitManagedFields`` they lose ``metadata.managedFields``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from setpoint.audit.policy import Decision, Level
from setpoint.auth.attributes import Attributes
from setpoint.auth.user import UserInfo

Obj = dict[str, Any]


def _without_managed_fields(obj: Any) -> Any:
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) and \
            "managedFields" in obj["metadata"]:
        meta = dict(obj["metadata"])
        del meta["managedFields"]
        return {**obj, "metadata": meta}
    return obj


@dataclass(slots=True)
class AuditRecord:
    attrs: Attributes
    decision: Decision
    request_uri: str
    source_ips: list[str]
    user_agent: str
    received: str
    authenticated_user: UserInfo | None = None  # set when the request impersonates
    omit_managed_fields: bool = False
    audit_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    annotations: dict[str, str] = field(default_factory=dict)
    request_object: Any = None
    response_object: Any = None
    response_status: Obj | None = None

    @property
    def level(self) -> Level:
        return self.decision.level

    def wants(self, stage: str) -> bool:
        return self.level > Level.NONE and stage not in self.decision.omit_stages

    def set_request_object(self, obj: Any) -> None:
        if self.level >= Level.REQUEST:
            self.request_object = obj

    def set_response(self, code: int, status: Obj | None, obj: Any = None) -> None:
        status_out: Obj = {"metadata": {}, "code": code}
        if status is not None:
            for key in ("status", "message", "reason"):
                if status.get(key):
                    status_out[key] = status[key]
        self.response_status = status_out
        if self.level >= Level.REQUEST_RESPONSE and obj is not None:
            self.response_object = obj

    def event(self, stage: str, now: str) -> Obj:
        attrs = self.attrs
        user = self.authenticated_user or attrs.user
        out: Obj = {
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": self.level.api_name,
            "auditID": self.audit_id, "stage": stage, "requestURI": self.request_uri,
            "verb": attrs.verb, "user": user.to_api(), "sourceIPs": self.source_ips,
            "userAgent": self.user_agent,
        }
        if self.authenticated_user is not None:
            out["impersonatedUser"] = attrs.user.to_api()
        if attrs.resource_request:
            ref: Obj = {"resource": attrs.resource}
            for key, value in (("namespace", attrs.namespace), ("name", attrs.name),
                               ("apiGroup", attrs.api_group),
                               ("apiVersion", attrs.api_version),
                               ("subresource", attrs.subresource)):
                if value:
                    ref[key] = value
            out["objectRef"] = ref
        if self.response_status is not None and stage != "RequestReceived":
            out["responseStatus"] = self.response_status
        strip = _without_managed_fields if self.omit_managed_fields else (lambda o: o)
        if self.request_object is not None:
            out["requestObject"] = strip(self.request_object)
        if self.response_object is not None and stage == "ResponseComplete":
            out["responseObject"] = strip(self.response_object)
        out["requestReceivedTimestamp"] = self.received
        out["stageTimestamp"] = now
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out
