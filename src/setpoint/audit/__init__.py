"""Audit: a record of who did what, in Kubernetes' ``audit.k8s.io/v1`` Event format.

``policy`` decides how much of a request to record (``None``, ``Metadata``, ``Request``,
``RequestResponse``), ``events`` builds the records, ``log`` writes them as JSON lines to a
file that rotates by size, keeping a bounded number of backups.
"""
