"""A tiny elastic data-parallel training for `torchrun` (sdk/examples/elastic-ddp.yaml): it saves a checkpoint when
it is asked to stop (SIGTERM: a shrink or a preemption deletes its pod with the termination grace) and every
`--save-every` steps, and resumes from the latest one at whatever world size torchrun restarts it with.

What survives a resize is the global step and the model: the data each rank reads is a function of the step, the
rank and the world size (`shard`), so no sample is skipped or read twice within a step however many ranks there are,
and the global batch stays `--batch-size` (each rank reads its share).

torch is not a dependency of Tidal: the image needs it. On one machine: `torchrun --nproc-per-node 2
train_elastic.py --steps 200 --checkpoint-dir ckpt` (then stop it with Ctrl-C and start it again with 3).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path
from typing import Any

STATE = "state.json"  # the step and world size the checkpoint was written at (the model is model.pt beside it)


class StopRequested:
    """Set by SIGTERM: the loop finishes its step, saves and exits 0; torchrun restarts it if the job goes on."""

    def __init__(self) -> None:
        self.stop = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.stop = True

    def install(self) -> StopRequested:
        signal.signal(signal.SIGTERM, self)
        return self


def shard(step: int, rank: int, world: int, batch: int) -> range:
    """The sample indexes rank `rank` of `world` reads at global step `step`: the step's global batch split into
    contiguous shares (the first `batch % world` ranks take one more)."""
    base, extra = divmod(batch, world)
    start = step * batch + rank * base + min(rank, extra)
    return range(start, start + base + (1 if rank < extra else 0))


def save_state(directory: Path, step: int, world: int) -> None:
    """Write the step atomically (rank 0 only: the model is the same on every rank)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (STATE + ".tmp")
    tmp.write_text(json.dumps({"step": step, "world_size": world}))
    os.replace(tmp, directory / STATE)


def load_state(directory: Path) -> int:
    """The step to resume from (0 without a checkpoint), whatever world size wrote it."""
    path = directory / STATE
    return int(json.loads(path.read_text())["step"]) if path.exists() else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=512, help="the global batch, split over the ranks")
    parser.add_argument("--checkpoint-dir", default=os.environ.get("TIDAL_CHECKPOINT_PATH") or "checkpoints",
                        help="shared by every rank's node (default: the job's checkpoint_path)")
    parser.add_argument("--save-every", type=int, default=100)
    parser.add_argument("--features", type=int, default=32)
    return parser.parse_args(argv)


def main() -> None:  # pragma: no cover  (needs torch and torchrun)
    import torch
    import torch.distributed as dist
    from torch import nn

    args = parse_args()
    stop = StopRequested().install()
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu")
    directory = Path(args.checkpoint_dir)
    directory.mkdir(parents=True, exist_ok=True)
    model = nn.Sequential(nn.Linear(args.features, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    if (directory / "model.pt").exists():
        model.load_state_dict(torch.load(directory / "model.pt", map_location=device))
    step = load_state(directory)
    ddp = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-2)
    weights = torch.linspace(-1, 1, args.features, device=device)
    print(f"rank {rank}/{world}: resuming at step {step}", flush=True)
    while step < args.steps:
        indexes = shard(step, rank, world, args.batch_size)
        generator = torch.Generator().manual_seed(indexes.start)
        x = torch.randn(len(indexes), args.features, generator=generator).to(device)
        loss = nn.functional.mse_loss(ddp(x).squeeze(1), torch.sin(x @ weights))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        # Every rank must agree to stop on the same step (one SIGTERM'd rank would hang the others' all-reduce).
        flag = torch.tensor([1.0 if stop.stop else 0.0], device=device)
        dist.all_reduce(flag)
        if rank == 0 and (flag.item() or step % args.save_every == 0 or step == args.steps):
            torch.save(model.state_dict(), directory / "model.pt.tmp")
            os.replace(directory / "model.pt.tmp", directory / "model.pt")
            save_state(directory, step, world)
        if flag.item():
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
