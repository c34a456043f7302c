"""Typed resource models shared by the typed-resource tests (and `setpoint crd generate`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from setpoint.runtime.typed import (
    Model,
    PrinterColumn,
    Resource,
    cel,
    cel_rules,
    custom_resource,
)


class Redrive(Model):
    """Where messages go after too many receives."""

    target: str = Field(description="The dead-letter queue's name")
    max_receives: int = Field(5, ge=1, le=1000, description="Receives before redrive")


class QueueSpec(Model):
    """The queue as it should be."""

    model_config = ConfigDict(json_schema_extra=cel_rules(
        cel("self.minDelay <= self.maxDelay", "minDelay must not exceed maxDelay"),
        cel("!has(self.redrive) || self.redrive.target != self.name",
            "a queue cannot redrive to itself", field_path=".redrive.target")))

    name: str = Field(min_length=1, max_length=80, pattern="^[a-zA-Z0-9_-]+$",
                      description="The queue's name at the provider")
    visibility_timeout: int = Field(30, ge=0, le=43_200, description="Seconds a message "
                                    "stays invisible after a receive")
    tier: Literal["standard", "fifo"] = Field("standard", description="The queue type")
    min_delay: int = 0
    max_delay: int = Field(0, ge=0, lt=901)
    ratio: float = Field(0.5, gt=0, le=1)
    tags: dict[str, str] = {}
    owners: set[str] = set()
    redrive: Redrive | None = None
    port: int | str = 80
    extra: dict[str, Any] = {}


class QueueStatus(Model):
    url: str | None = None
    ready: bool = False
    observed_generation: int | None = None
    since: datetime | None = None


@custom_resource(group="sqs.example.com", version="v1", kind="Queue", short_names=["q"],
                 columns=[PrinterColumn("URL", ".status.url"),
                          PrinterColumn("Tier", ".spec.tier", priority=1)])
class Queue(Resource):
    """A message queue at a cloud provider."""

    spec: QueueSpec
    status: QueueStatus | None = None


class QueueSpecV2(Model):
    name: str = Field(min_length=1)
    visibility_timeout: int = 60


@custom_resource(group="sqs.example.com", version="v2", kind="Queue", short_names=["q"],
                 storage=False)
class QueueV2(Resource):
    spec: QueueSpecV2
