"""Reading kubeconfig files the way kubectl does, as plain data.

This module only finds, parses and merges kubeconfig documents and picks the entries a context
names; :mod:`setpoint.client.config` turns the result into a :class:`ClientConfig`.

Rules (client-go ``clientcmd`` loading rules):

- An explicit path is the only file read, and it must exist.
- Otherwise ``KUBECONFIG`` lists files separated by ``os.pathsep`` (``:`` on POSIX). Empty
  entries and duplicates are skipped, and so are files that do not exist. When ``KUBECONFIG``
  is unset or empty, ``~/.kube/config`` is read.
- Merging: clusters, users and contexts are keyed by name and **the first file that defines a
  name wins**, whole entry; the first non-empty ``current-context`` wins.
- Relative file paths inside a file (``certificate-authority``, ``client-certificate``,
  ``client-key``, ``tokenFile``) are resolved against **that file's directory**, before
  merging, so a merged entry keeps pointing where its own file meant.

Non-guarantees: ``~`` inside a kubeconfig is not expanded (client-go does not either), and
``preferences`` and ``extensions`` are ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

Entry = dict[str, Any]

#: fields holding file paths, per section, resolved relative to the defining file
_PATH_FIELDS: Mapping[str, tuple[str, ...]] = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


class ConfigError(ValueError):
    """A kubeconfig or in-cluster configuration that cannot be used, with the reason."""


@dataclass(frozen=True, slots=True)
class Kubeconfig:
    """Merged kubeconfig documents: entries by name, in first-file-wins order."""

    clusters: Mapping[str, Entry]
    users: Mapping[str, Entry]
    contexts: Mapping[str, Entry]
    current_context: str
    #: the files that were read, in merge order
    sources: tuple[Path, ...]


@dataclass(frozen=True, slots=True)
class Selection:
    """What one context names: its cluster and user entries and its namespace."""

    context: str
    cluster: Entry
    user: Entry
    namespace: str


def default_paths(environ: Mapping[str, str], home: Path | None = None) -> list[Path]:
    """The files to read when no explicit path is given, in merge order."""
    listed = environ.get("KUBECONFIG", "")
    if listed:
        seen: set[str] = set()
        paths: list[Path] = []
        for item in listed.split(os.pathsep):
            if item and item not in seen:
                seen.add(item)
                paths.append(Path(item))
        return paths
    return [(home or Path.home()) / ".kube" / "config"]


def _load_document(path: Path) -> Mapping[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read kubeconfig {path}: {e.strerror or e}") from e
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"kubeconfig {path} is not valid YAML: {e}") from e
    if document is None:
        return {}
    if not isinstance(document, Mapping):
        raise ConfigError(f"kubeconfig {path} is not a mapping")
    return document


def _named_entries(document: Mapping[str, Any], section: str, key: str,
                   path: Path) -> list[tuple[str, Entry]]:
    items = document.get(section) or []
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise ConfigError(f"kubeconfig {path}: {section!r} must be a list")
    entries: list[tuple[str, Entry]] = []
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ConfigError(f"kubeconfig {path}: every entry of {section!r} needs a name")
        body = item.get(key) or {}
        if not isinstance(body, Mapping):
            raise ConfigError(f"kubeconfig {path}: {section}[{item['name']!r}].{key} "
                              "must be a mapping")
        entry = dict(body)
        for field in _PATH_FIELDS.get(key, ()):
            value = entry.get(field)
            if isinstance(value, str) and value and not os.path.isabs(value):
                entry[field] = str(path.parent / value)
        entries.append((item["name"], entry))
    return entries


def merge(paths: Sequence[Path], *, require_all: bool) -> Kubeconfig:
    """Read and merge ``paths``; missing files are skipped unless ``require_all``."""
    documents: list[tuple[Path, Mapping[str, Any]]] = []
    for path in paths:
        if not require_all and not path.exists():
            continue
        documents.append((path, _load_document(path)))
    if not documents:
        shown = ", ".join(str(p) for p in paths) or "(none)"
        raise ConfigError(f"no kubeconfig file found (looked at {shown})")
    return merge_documents(documents)


def merge_documents(documents: Sequence[tuple[Path, Mapping[str, Any]]]) -> Kubeconfig:
    """Merge kubeconfig documents already read (``(where it came from, document)``)."""
    clusters: dict[str, Entry] = {}
    users: dict[str, Entry] = {}
    contexts: dict[str, Entry] = {}
    current = ""
    sources: list[Path] = []
    for path, document in documents:
        sources.append(path)
        for target, section, key in ((clusters, "clusters", "cluster"),
                                     (users, "users", "user"),
                                     (contexts, "contexts", "context")):
            for name, entry in _named_entries(document, section, key, path):
                target.setdefault(name, entry)
        if not current:
            value = document.get("current-context")
            current = value if isinstance(value, str) else ""
    return Kubeconfig(clusters, users, contexts, current, tuple(sources))


def select(config: Kubeconfig, context: str | None = None) -> Selection:
    """The cluster, user and namespace that ``context`` (default: current-context) names."""
    name = context or config.current_context
    where = ", ".join(str(p) for p in config.sources)
    if not name:
        raise ConfigError(f"no context given and no current-context set in {where}")
    ctx = config.contexts.get(name)
    if ctx is None:
        raise ConfigError(f"context {name!r} not found in {where}")
    cluster_name = ctx.get("cluster")
    if not isinstance(cluster_name, str) or cluster_name not in config.clusters:
        raise ConfigError(f"context {name!r} names cluster {cluster_name!r}, "
                          f"which is not defined in {where}")
    user_name = ctx.get("user")
    if user_name and (not isinstance(user_name, str) or user_name not in config.users):
        raise ConfigError(f"context {name!r} names user {user_name!r}, "
                          f"which is not defined in {where}")
    user = config.users[user_name] if user_name else {}
    namespace = ctx.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise ConfigError(f"context {name!r}: namespace must be a string")
    return Selection(name, config.clusters[cluster_name], user, namespace)
