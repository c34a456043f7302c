"""The fields of Kubernetes' ``metav1.ObjectMeta``: what survives in ``metadata``.

Decoding into the typed object drops every other member, so pruning (of custom resources and
built-in kinds alike) keeps exactly these. One list for the whole server: a field added here
is kept everywhere at once.
"""

from __future__ import annotations

from typing import Final

#: JSON names of the members of ``metav1.ObjectMeta``
OBJECT_META_FIELDS: Final = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
})
