"""Where GPU telemetry is read from per cluster, how far it was read, and what it found per attempt.

The readings themselves are the runs' system series (tracking's points and rollups, `system/gpu.<i>.<field>`); these
rows hold only what the pages and the idle check need without reading points: each GPU an attempt held (where it
is, its last readings) and a per-attempt tally (mean SM activity: the "GPU efficiency")."""

from __future__ import annotations

from django.db import models

from telemetry.fields import Labels

_DEFAULT = Labels()


class TelemetrySource(models.Model):
    """A cluster's DCGM metrics in the Prometheus at TIDAL_PROMETHEUS_URL: the labels its exporters use, the
    matchers that pick its series, and the time read through (the reader's resumable position)."""

    cluster = models.OneToOneField("clusters.Cluster", on_delete=models.CASCADE, related_name="telemetry_source")
    enabled = models.BooleanField(default=True)
    pod_label = models.CharField(max_length=100, default=_DEFAULT.pod)
    namespace_label = models.CharField(max_length=100, default=_DEFAULT.namespace, blank=True)
    node_label = models.CharField(max_length=100, default=_DEFAULT.node)
    gpu_label = models.CharField(max_length=100, default=_DEFAULT.gpu)
    uuid_label = models.CharField(max_length=100, default=_DEFAULT.uuid, blank=True)
    host_label = models.CharField(max_length=100, default=_DEFAULT.host, blank=True,
                                  help_text="The label naming the node on node-level (RDMA) series; host:port allowed. "
                                            "Empty: node-level counters are not read.")
    selector = models.CharField(max_length=500, blank=True,
                                help_text='Matchers every query adds, e.g. cluster="a100-east".')
    read_through = models.DateTimeField(null=True, blank=True, help_text="Samples up to here are stored.")
    last_error = models.CharField(max_length=500, blank=True)
    last_read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster__name"]

    def __str__(self) -> str:
        return f"telemetry of cluster {self.cluster_id}"

    @property
    def labels(self) -> Labels:
        return Labels(pod=self.pod_label, namespace=self.namespace_label, node=self.node_label, gpu=self.gpu_label,
                      uuid=self.uuid_label, host=self.host_label)


class AttemptGpu(models.Model):
    """One GPU an attempt held, numbered in the attempt (`ordinal`: its series are `system/gpu.<ordinal>.*`), with
    its latest readings for the Clusters page's grid."""

    attempt = models.ForeignKey("jobs.Attempt", on_delete=models.CASCADE, related_name="gpus")
    ordinal = models.PositiveSmallIntegerField()
    node = models.CharField(max_length=253)
    gpu = models.PositiveSmallIntegerField(help_text="The GPU's index on its node.")
    uuid = models.CharField(max_length=100, blank=True)
    last_at = models.DateTimeField(null=True, blank=True)
    last_sm_active = models.FloatField(null=True, blank=True)
    last_utilization = models.FloatField(null=True, blank=True)
    last_memory_used_gib = models.FloatField(null=True, blank=True)
    last_power_watts = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["attempt", "ordinal"]
        constraints = [models.UniqueConstraint(fields=["attempt", "node", "gpu"], name="one_row_per_attempt_gpu"),
                       models.UniqueConstraint(fields=["attempt", "ordinal"], name="one_gpu_per_ordinal")]
        indexes = [models.Index(fields=["node", "last_at"], name="telemetry_gpu_node_idx")]

    def __str__(self) -> str:
        return f"attempt {self.attempt_id} gpu {self.ordinal} ({self.node}/{self.gpu})"


class AttemptTelemetry(models.Model):
    """What an attempt's GPUs did, tallied as samples arrive: mean SM activity and utilization over its samples
    (the GPU efficiency columns), and since when every one of its GPUs has been idle (the idle check)."""

    attempt = models.OneToOneField("jobs.Attempt", on_delete=models.CASCADE, related_name="telemetry")
    sm_sum = models.FloatField(default=0.0)
    sm_count = models.PositiveIntegerField(default=0)
    utilization_sum = models.FloatField(default=0.0)
    utilization_count = models.PositiveIntegerField(default=0)
    first_at = models.DateTimeField(null=True, blank=True)
    last_at = models.DateTimeField(null=True, blank=True)
    idle_since = models.DateTimeField(null=True, blank=True,
                                      help_text="Every GPU under the idle threshold since (None: busy).")

    def __str__(self) -> str:
        return f"telemetry of attempt {self.attempt_id}"

    @property
    def sm_active(self) -> float | None:
        return self.sm_sum / self.sm_count if self.sm_count else None

    @property
    def utilization(self) -> float | None:
        return self.utilization_sum / self.utilization_count if self.utilization_count else None


class StagedPoints(models.Model):
    """An attempt's points of one read not yet written into its run's series (telemetry.store): a run's series cost
    a block and its rollups per key and write whatever the points in it, so each attempt's are written every
    TIDAL_TELEMETRY_WRITE_EVERY seconds, several reads at once. Kept in the read's transaction with the position,
    so a crash loses nothing. The points as tracking's batch, packed: the keys, then per key its count, and the
    steps, timestamps (ms) and values of every key one after the other."""

    attempt = models.ForeignKey("jobs.Attempt", on_delete=models.CASCADE, related_name="+")
    first_at = models.BigIntegerField(help_text="Unix seconds of its earliest sample.")
    keys = models.JSONField()
    counts = models.BinaryField()
    steps = models.BinaryField()
    timestamps = models.BinaryField()
    values = models.BinaryField()

    def __str__(self) -> str:
        return f"staged points of attempt {self.attempt_id}"
