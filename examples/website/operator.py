"""The Website operator: render each Website to an ``index.html`` in a ConfigMap it owns.

For a ``Website`` (``web.example.com/v1``) named ``hello``, the operator keeps a ConfigMap
``hello-site`` whose ``index.html`` is the page rendered from the spec (title, paragraphs,
links; every text is HTML-escaped), with a controller owner reference to the Website, and
reports the ConfigMap's name and the page's hash in ``status``.

Ownership does the rest:

- the controller ``owns`` ConfigMaps, so any change to ``hello-site`` (an edit, a deletion)
  reconciles ``hello``, which puts the page back: a deleted ConfigMap is re-created as soon
  as the deletion reaches the watch;
- the owner reference lets the garbage collector delete the ConfigMap with its Website (on
  clusters that run one), so a deleted Website needs no code here.

The reconcile is level-based: it compares the rendered page with the cached ConfigMap and
writes only on a difference. The code uses only ``setpoint.runtime`` and ``setpoint.client``,
so it runs unchanged against any cluster::

    setpoint run examples/website/operator.py --kubeconfig .setpoint/kubeconfig
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Mapping
from typing import Any

from setpoint.apimachinery import errors
from setpoint.runtime import (
    Context,
    Registry,
    Request,
    Result,
    controller_of,
    set_controller_reference,
)

WEBSITE = ("web.example.com/v1", "Website")
CONFIGMAP = ("v1", "ConfigMap")

registry = Registry()


def render(spec: Mapping[str, Any]) -> str:
    """The page a Website's spec describes."""
    title = html.escape(spec["title"])
    lines = ["<!doctype html>", "<html>", "<head>", '<meta charset="utf-8">',
             f"<title>{title}</title>", "</head>", "<body>", f"<h1>{title}</h1>"]
    lines += [f"<p>{html.escape(p)}</p>" for p in spec.get("paragraphs") or ()]
    links = spec.get("links") or ()
    if links:
        lines.append("<ul>")
        lines += [f'<li><a href="{html.escape(link["href"], quote=True)}">'
                  f'{html.escape(link["text"])}</a></li>' for link in links]
        lines.append("</ul>")
    lines += ["</body>", "</html>", ""]
    return "\n".join(lines)


def content_hash(page: str) -> str:
    return hashlib.sha256(page.encode()).hexdigest()[:12]


def site_name(website_name: str) -> str:
    return f"{website_name}-site"


@registry.controller(for_=WEBSITE, owns=[CONFIGMAP])
async def reconcile(request: Request, ctx: Context) -> Result:
    website = ctx.get(request)
    if website is None:
        return Result.done()  # the garbage collector follows the owner reference
    page = render(website["spec"])
    name = site_name(request.name)
    current = ctx.cache_for(CONFIGMAP).get(f"{request.namespace}/{name}")
    if current is None:
        wanted: dict[str, Any] = {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": request.namespace,
                         "labels": {"app.kubernetes.io/managed-by": "website-operator",
                                    "web.example.com/website": request.name}},
            "data": {"index.html": page}}
        set_controller_reference(website, wanted)
        try:
            await ctx.client.create(wanted)
            await ctx.recorder.normal(website, "Published", f"created ConfigMap {name}")
        except errors.AlreadyExists:
            return Result(requeue=True)  # the cache is behind: look again when it is not
    else:
        owner = controller_of(current)
        if owner is not None and owner.get("uid") != website["metadata"]["uid"]:
            await ctx.recorder.warning(website, "NameTaken",
                                       f"ConfigMap {name} belongs to another object")
            return Result.done()
        patch: dict[str, Any] = {}
        if (current.get("data") or {}).get("index.html") != page:
            patch["data"] = {"index.html": page}
        if owner is None:  # the name is ours but nobody controls it: adopt it
            adopted: dict[str, Any] = {"metadata": {"ownerReferences": list(
                current["metadata"].get("ownerReferences") or [])}}
            set_controller_reference(website, adopted)
            patch["metadata"] = adopted["metadata"]
        if patch:
            await ctx.client.patch(CONFIGMAP, name, patch, namespace=request.namespace)
            await ctx.recorder.normal(website, "Updated", f"updated ConfigMap {name}")
    status = website.get("status") or {}
    wanted_status = {"configMap": name, "contentHash": content_hash(page),
                     "observedGeneration": website["metadata"].get("generation")}
    if any(status.get(k) != v for k, v in wanted_status.items()):
        await ctx.client.patch_status(WEBSITE, request.name, {"status": wanted_status},
                                      namespace=request.namespace)
    return Result.done()
