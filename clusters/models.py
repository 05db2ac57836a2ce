"""Clusters and their nodes: the inventory the scheduler places gangs on."""

from __future__ import annotations

from django.core.validators import MinValueValidator
from django.db import models

from quotas.models import Arch, ResourceFlavor


class Cluster(models.Model):
    class Backend(models.TextChoices):
        SIMULATED = "simulated", "Simulated"
        KUBERNETES = "kubernetes", "Kubernetes"

    name = models.CharField(max_length=63, unique=True)
    backend = models.CharField(max_length=20, choices=Backend.choices, default=Backend.SIMULATED)
    description = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True, help_text="Disabled clusters get no new jobs.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    flavor = models.ForeignKey(ResourceFlavor, on_delete=models.PROTECT, related_name="nodes")
    devices = models.PositiveIntegerField(help_text="Allocatable devices of the flavor.")
    foreign_used = models.PositiveIntegerField(
        default=0, help_text="Devices taken by pods the platform did not create; the scheduler never counts on them."
    )
    cpu_millis = models.PositiveIntegerField(default=0)
    memory_mib = models.PositiveIntegerField(default=0)
    arch = models.CharField(max_length=10, choices=Arch.choices, default=Arch.AMD64)
    block = models.CharField(max_length=63, blank=True)
    rack = models.CharField(max_length=63, blank=True)
    switch = models.CharField(max_length=63, blank=True)
    taints = models.JSONField(default=list, blank=True)
    cordoned = models.BooleanField(default=False)
    ready = models.BooleanField(default=True)
    position = models.PositiveIntegerField(
        default=0, validators=[MinValueValidator(0)], help_text="Order of the node in its cluster (ties in placement)."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster__name", "position", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="node_name_per_cluster")]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.cordoned and self.cluster.enabled
