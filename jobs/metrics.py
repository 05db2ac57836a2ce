"""Prometheus metrics of the scheduling queue."""

from prometheus_client import Counter, Gauge, Histogram

QUEUE_LENGTH = Gauge("tidal_queue_length", "Jobs waiting in the queue", ["project", "flavor"])
CYCLE_SECONDS = Histogram("tidal_scheduler_cycle_seconds", "Duration of one scheduling cycle (read, decide, write)",
                          buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
PHASE_SECONDS = Histogram("tidal_scheduler_phase_seconds", "Time one scheduling cycle spent in each phase "
                          "(core.PHASES, and the forecast of waiting jobs' starts)", ["phase"],
                          buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
ADMISSIONS = Counter("tidal_admissions_total", "Jobs admitted", ["project", "flavor"])
PREEMPTIONS = Counter("tidal_preemptions_total", "Jobs preempted", ["project", "flavor"])
SUBMIT_TO_ADMIT = Histogram("tidal_submit_to_admit_seconds", "Time from submission to admission",
                            buckets=(1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400))
RESIZES = Counter("tidal_resizes_total", "Elastic jobs' attempts resized (grow, shrink)", ["kind"])
