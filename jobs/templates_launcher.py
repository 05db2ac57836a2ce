"""Starting points for the submit form: one YAML job spec per launcher, with the fields people usually change.

The text is what the user edits in the form's YAML editor, so it keeps comments. `{flavor}` is filled in with a
flavor the current project has a quota for (or any flavor), so a template submitted unchanged is valid.
"""

from __future__ import annotations

from jobs.models import Launcher

_PRIORITY_LINE = "priority_class: {priority}   # larger classes run first; preemptible ones only on idle capacity\n"
_COMMON_TAIL = """\
topology: none               # none, prefer-same-rack, require-same-rack, require-same-block
max_runtime: 7200            # seconds; helps backfill and the queue's ETA
retry_limit: 2               # retries of the whole gang from the latest checkpoint
checkpoint_path: s3://bucket/checkpoints/{name}
duration: 600                # simulated clusters only: how long the job runs
labels:
  team: research
"""

_TEMPLATES: dict[str, str] = {
    Launcher.PYTORCH: """\
# PyTorch DDP/FSDP with torchrun: one pod per replica, nproc_per_node processes in each.
name: {name}
stage: pretrain              # pretrain, sft, rl, eval, data, other
launcher: pytorch
image: ghcr.io/acme/trainer:latest
command: [torchrun]
args: [train.py, --config, configs/base.yaml]
launcher_options:
  nproc_per_node: 8
env:
  NCCL_DEBUG: WARN
groups:
  - role: worker
    replicas: 2              # or {{min: 2, max: 8}}: elastic, runs on 2..8 workers (topology: none)
    devices: 8               # devices per replica
    flavor: {flavor}
""",
    Launcher.DEEPSPEED: """\
# DeepSpeed: the platform writes the hostfile and starts the deepspeed launcher on every replica.
name: {name}
stage: sft
launcher: deepspeed
image: ghcr.io/acme/trainer:latest
command: [deepspeed]
args: [train.py, --deepspeed, ds_config.json]
env:
  NCCL_DEBUG: WARN
groups:
  - role: worker
    replicas: 2
    devices: 8
    flavor: {flavor}
""",
    Launcher.MEGATRON: """\
# Megatron-LM: tensor_parallel x pipeline_parallel must divide replicas x devices.
name: {name}
stage: pretrain
launcher: megatron
image: ghcr.io/acme/megatron:latest
command: [torchrun]
args: [pretrain_gpt.py, --micro-batch-size, "1"]
launcher_options:
  tensor_parallel: 8
  pipeline_parallel: 2
groups:
  - role: worker
    replicas: 2
    devices: 8
    flavor: {flavor}
""",
    Launcher.RAY: """\
# Ray: the first replica is the head and runs the entrypoint; the others join as workers.
name: {name}
stage: rl
launcher: ray
image: rayproject/ray:2.40.0-gpu
command: [python]
args: []
launcher_options:
  entrypoint: python train_ppo.py --num-workers 3
groups:
  - role: head
    replicas: 1
    devices: 1
    flavor: {flavor}
  - role: worker
    replicas: 3
    devices: 4
    flavor: {flavor}
""",
    Launcher.COMMAND: """\
# A plain command in every replica, without rendezvous setup.
name: {name}
stage: data
launcher: command
image: python:3.11-slim
command: [python, -c]
args: ["print('hello from Tidal')"]
groups:
  - role: worker
    replicas: 1
    devices: 1
    flavor: {flavor}
""",
}

DEFAULT_NAMES: dict[str, str] = {
    Launcher.PYTORCH: "my-pytorch-job",
    Launcher.DEEPSPEED: "my-deepspeed-job",
    Launcher.MEGATRON: "my-megatron-job",
    Launcher.RAY: "my-ray-job",
    Launcher.COMMAND: "my-command-job",
}


def launcher_choices() -> list[tuple[str, str]]:
    return list(Launcher.choices)


def launcher_template(launcher: str, *, flavor: str, priority: str | None = None) -> str:
    """The YAML starting point for `launcher` (unknown launchers fall back to pytorch).

    Without `priority` the line is left out and the platform's default class applies.
    """
    if launcher not in _TEMPLATES:
        launcher = Launcher.PYTORCH
    name = DEFAULT_NAMES[launcher]
    text = _TEMPLATES[launcher] + (_PRIORITY_LINE if priority else "") + _COMMON_TAIL
    return text.format(name=name, flavor=flavor, priority=priority)
