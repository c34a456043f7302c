"""An audit ``Policy`` (audit.k8s.io/v1): the first rule that matches a request decides.

A rule matches when every field it sets matches: ``users``, ``userGroups`` (any of),
``verbs``, ``namespaces`` (``""`` matches cluster-scoped requests), ``resources`` (group,
resources with ``*`` and ``resource/subresource`` forms, resourceNames) for resource requests,
``nonResourceURLs`` (exact, or prefix with a trailing ``*``) for the others. A rule with
``resources`` never matches a non-resource request and vice versa. No matching rule means
``None``: nothing is recorded. ``omitStages`` of the policy and the rule are both applied.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from setpoint.auth.attributes import Attributes

STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")


class Level(enum.IntEnum):
    NONE = 0
    METADATA = 1
    REQUEST = 2
    REQUEST_RESPONSE = 3

    @classmethod
    def parse(cls, text: str) -> Level:
        try:
            return {"None": cls.NONE, "Metadata": cls.METADATA, "Request": cls.REQUEST,
                    "RequestResponse": cls.REQUEST_RESPONSE}[text]
        except KeyError:
            raise PolicyError(f"unknown audit level {text!r}") from None

    @property
    def api_name(self) -> str:
        return {Level.NONE: "None", Level.METADATA: "Metadata", Level.REQUEST: "Request",
                Level.REQUEST_RESPONSE: "RequestResponse"}[self]


class PolicyError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class GroupResources:
    group: str
    resources: tuple[str, ...]
    resource_names: tuple[str, ...]

    def matches(self, attrs: Attributes) -> bool:
        if attrs.api_group != self.group:
            return False
        if self.resources:
            combined = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
            if not any(r in ("*", combined) or (r == f"{attrs.resource}/*" and attrs.subresource)
                       or (r == f"*/{attrs.subresource}" and attrs.subresource)
                       for r in self.resources):
                return False
        return not self.resource_names or attrs.name in self.resource_names


@dataclass(frozen=True, slots=True)
class Rule:
    level: Level
    users: tuple[str, ...] = ()
    user_groups: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    resources: tuple[GroupResources, ...] = ()
    non_resource_urls: tuple[str, ...] = ()
    omit_stages: frozenset[str] = frozenset()

    def matches(self, attrs: Attributes) -> bool:
        if self.users and attrs.user.name not in self.users:
            return False
        if self.user_groups and not set(self.user_groups) & set(attrs.user.groups):
            return False
        if self.verbs and attrs.verb not in self.verbs:
            return False
        if attrs.resource_request:
            if self.non_resource_urls:
                return False
            if self.namespaces and attrs.namespace not in self.namespaces:
                return False
            return not self.resources or any(g.matches(attrs) for g in self.resources)
        if self.resources or self.namespaces:
            return False
        if not self.non_resource_urls:
            return True
        return any(u == attrs.path or (u.endswith("*") and attrs.path.startswith(u[:-1]))
                   for u in self.non_resource_urls)


@dataclass(frozen=True, slots=True)
class Decision:
    level: Level
    omit_stages: frozenset[str]


@dataclass(frozen=True, slots=True)
class Policy:
    rules: tuple[Rule, ...]
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool = False

    def decide(self, attrs: Attributes) -> Decision:
        for rule in self.rules:
            if rule.matches(attrs):
                return Decision(rule.level, self.omit_stages | rule.omit_stages)
        return Decision(Level.NONE, self.omit_stages)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{where} must be a list of strings")
    return tuple(value)


def _stages(value: Any, where: str) -> frozenset[str]:
    stages = _strings(value, where)
    for stage in stages:
        if stage not in STAGES:
            raise PolicyError(f"{where}: unknown stage {stage!r}")
    return frozenset(stages)


def parse_policy(doc: Any) -> Policy:
    if not isinstance(doc, Mapping) or doc.get("kind") != "Policy" or \
            doc.get("apiVersion") != "audit.k8s.io/v1":
        raise PolicyError("not an audit.k8s.io/v1 Policy")
    rules: list[Rule] = []
    raw_rules = doc.get("rules")
    if not isinstance(raw_rules, list):
        raise PolicyError("rules must be a list")
    for i, raw in enumerate(raw_rules):
        where = f"rules[{i}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("level"), str):
            raise PolicyError(f"{where}: every rule needs a level")
        groups: list[GroupResources] = []
        for j, gr in enumerate(raw.get("resources") or []):
            if not isinstance(gr, Mapping):
                raise PolicyError(f"{where}.resources[{j}] must be an object")
            group = gr.get("group", "")
            if not isinstance(group, str):
                raise PolicyError(f"{where}.resources[{j}].group must be a string")
            groups.append(GroupResources(group, _strings(gr.get("resources"), where),
                                         _strings(gr.get("resourceNames"), where)))
        urls = _strings(raw.get("nonResourceURLs"), where)
        if urls and (groups or raw.get("namespaces")):
            raise PolicyError(f"{where}: nonResourceURLs cannot be combined with resources or "
                              "namespaces")
        rules.append(Rule(Level.parse(raw["level"]), _strings(raw.get("users"), where),
                          _strings(raw.get("userGroups"), where),
                          _strings(raw.get("verbs"), where),
                          _strings(raw.get("namespaces"), where), tuple(groups), urls,
                          _stages(raw.get("omitStages"), where)))
    return Policy(tuple(rules), _stages(doc.get("omitStages"), "omitStages"),
                  bool(doc.get("omitManagedFields", False)))


def load_policy(path: Path) -> Policy:
    try:
        return parse_policy(yaml.safe_load(path.read_text()))
    except yaml.YAMLError as e:
        raise PolicyError(f"{path}: not YAML: {e}") from e


def default_policy() -> Policy:
    """What ``setpoint serve`` records when asked to audit without a policy file.

    Metadata for everything, but request and response bodies for writes to RBAC objects;
    nothing for health checks, ``/version`` and ``/metrics``; the contents of Secrets,
    ConfigMaps, TokenRequests and TokenReviews never (they would put secrets into the log);
    no ``RequestReceived`` stage.
    """
    return parse_policy({
        "apiVersion": "audit.k8s.io/v1", "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {"level": "None", "nonResourceURLs": ["/healthz*", "/livez*", "/readyz*",
                                                  "/version", "/metrics"]},
            {"level": "Metadata", "resources": [
                {"group": "", "resources": ["secrets", "configmaps", "serviceaccounts/token"]},
                {"group": "authentication.k8s.io", "resources": ["tokenreviews"]}]},
            {"level": "RequestResponse", "verbs": ["create", "update", "patch", "delete"],
             "resources": [{"group": "rbac.authorization.k8s.io"}]},
            {"level": "Metadata"},
        ]})

