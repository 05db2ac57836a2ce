"""Demo jobs, submitted through the same service as the API, so the queue is alive on first visit."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from jobs.models import Job
from jobs.services import job_submit
from quotas.models import PriorityClass, ResourceFlavor
from tenancy.models import Project

# project, submitter, name, stage, launcher, flavor, replicas, devices, duration (s), priority, topology
JOBS = [
    ("language", "alice", "llama-70b-pretrain", "pretrain", "megatron", "nvidia-h100-80gb", 4, 8, 3600, "high",
     "require-same-block"),
    ("language", "carol", "sft-chat-v3", "sft", "deepspeed", "nvidia-h100-80gb", 2, 8, 900, "normal",
     "prefer-same-rack"),
    ("language", "carol", "eval-mmlu", "eval", "pytorch", "nvidia-h100-80gb", 1, 1, 240, "normal", "none"),
    ("vision", "carol", "vit-g-pretrain", "pretrain", "pytorch", "nvidia-a100-40gb", 4, 8, 2400, "normal",
     "require-same-rack"),
    ("vision", "bob", "detector-sft", "sft", "pytorch", "nvidia-a100-40gb", 1, 8, 600, "normal", "none"),
    ("vision", "carol", "clip-ablation-1", "other", "command", "nvidia-a100-40gb", 1, 4, 300, "low", "none"),
    ("vision", "carol", "clip-ablation-2", "other", "command", "nvidia-a100-40gb", 1, 4, 300, "low", "none"),
    ("vision", "alice", "vision-big-sweep", "pretrain", "pytorch", "nvidia-h100-80gb", 4, 8, 1800, "normal", "none"),
    ("robotics", "carol", "ppo-locomotion", "rl", "ray", "nvidia-a100-40gb", 3, 4, 1200, "normal", "none"),
    ("robotics", "alice", "sim-data-gen", "data", "command", "nvidia-h100-80gb", 1, 8, 1500, "preemptible", "none"),
    ("robotics", "carol", "grpo-manipulation", "rl", "ray", "nvidia-h100-80gb", 2, 8, 900, "normal", "none"),
    ("language", "alice", "ascend-port-test", "eval", "pytorch", "ascend-910b", 2, 8, 600, "normal", "none"),
    ("vision", "bob", "elastic-ddp", "pretrain", "pytorch", "nvidia-h100-80gb", 4, 8, 2400, "normal", "none"),
]
# Elastic demo jobs: the minimum of their group (replicas above is the maximum) and their resize cooldown, short so
# that `make run` shows one admitted at its minimum grow into idle capacity within a minute or two.
ELASTIC = {"elastic-ddp": (1, 60)}

# The experiment each demo job's run is logged to, and the failures the simulated curves inject
# (tracking/demo.py): a run diverging to NaN and one whose throughput collapses, both within a minute of `make run`
# (jobs the scheduler admits at once).
EXPERIMENTS = {"llama-70b-pretrain": "llama-70b", "sft-chat-v3": "chat-sft", "eval-mmlu": "evals",
               "vit-g-pretrain": "vit-g", "detector-sft": "detector", "clip-ablation-1": "clip-ablations",
               "clip-ablation-2": "clip-ablations", "vision-big-sweep": "vision-sweep", "ppo-locomotion": "locomotion",
               "sim-data-gen": "sim-data", "grpo-manipulation": "manipulation", "ascend-port-test": "ascend-port",
               "elastic-ddp": "elastic-ddp"}
# And the failures the simulated cluster injects, for the failure diagnosis to show (docs/reliability-diagnosis.md):
# a GPU falling off the bus (its node quarantined, the job retried elsewhere) and a CUDA out of memory.
LABELS = {"sft-chat-v3": {"sim.tidal.dev/anomaly": "nan", "sim.tidal.dev/anomaly-step": "250"},
          "vit-g-pretrain": {"sim.tidal.dev/anomaly": "throughput", "sim.tidal.dev/anomaly-step": "300"},
          "grpo-manipulation": {"sim.tidal.dev/fail-after": "90", "sim.tidal.dev/fail-cause": "xid_bus"},
          "eval-mmlu": {"sim.tidal.dev/fail-after": "60", "sim.tidal.dev/fail-cause": "cuda_oom"},
          # Its GPUs idle from the start (a data job holding GPUs for CPU work): GPU telemetry's gpu_idle alert opens
          # after 15 minutes (telemetry/simulated.py).
          "sim-data-gen": {"sim.tidal.dev/gpu-idle": "true"}}


def seed_jobs() -> int:
    if Job.objects.exists():
        return 0
    users = {u.username: u for u in get_user_model().objects.all()}
    for project, who, name, stage, launcher, flavor, replicas, devices, duration, priority, topology in JOBS:
        options: dict[str, Any] = {}
        if launcher == "megatron":
            options = {"tensor_parallel": 8, "pipeline_parallel": 2}
        elif launcher == "ray":
            options = {"entrypoint": "python train.py"}
        least, cooldown = ELASTIC.get(name, (None, 300))
        job_submit(actor=users[who], project=Project.objects.get(slug=project), spec={
            "name": name, "stage": stage, "launcher": launcher, "image": "ghcr.io/acme/trainer:2026.11",
            "command": ["python", "train.py"], "args": ["--config", f"configs/{name}.yaml"],
            "groups": [{"role": "worker", "replicas": replicas, "devices": devices, "min_replicas": least,
                        "flavor": ResourceFlavor.objects.get(name=flavor)}],
            "resize_cooldown": cooldown,
            "priority_class": PriorityClass.objects.get(name=priority), "topology": topology,
            "max_runtime": duration * 2, "duration": duration, "retry_limit": 2,
            "checkpoint_path": f"s3://acme-ckpt/{project}/{name}", "launcher_options": options,
            "experiment": EXPERIMENTS[name], "labels": LABELS.get(name, {}),
        })
    return len(JOBS)
