"""A tiny PyTorch training on CPU, tracked with the `tidal` SDK: a 2-layer MLP fits a synthetic regression for about
a minute and logs loss, learning rate, gradient norm and samples/s (and, every 10 s, system metrics).

torch is not a dependency of Tidal: install it next to the SDK first, e.g. `pip install torch` (any recent CPU or
CUDA build works; the script runs on CPU).

On your machine (after `tidal login`; the run goes to a new run of experiment `tiny-mlp`):

    python sdk/examples/train_tiny.py --project vision [--seconds 60]

Inside a Tidal job (see tracked-training.yaml) the same script continues the job's run: `tidal.init()` finds
TIDAL_RUN_ID and TIDAL_RUN_TOKEN in its environment and ignores --project.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

try:
    import torch
    from torch import nn
except ImportError:
    sys.exit("train_tiny.py needs PyTorch: pip install torch")

import tidal


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", help="the Tidal project (default: the CLI's default project)")
    parser.add_argument("--experiment", default="tiny-mlp")
    parser.add_argument("--seconds", type=float, default=60.0, help="training time budget")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (cosine decay to 0)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--log-every", type=int, default=10, help="steps between logged points")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def synthetic_batch(weights: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """y = sin(x . w) + small noise: easy to learn, never quite zero loss."""
    x = torch.randn(size, weights.shape[0])
    y = torch.sin(x @ weights) + 0.05 * torch.randn(size)
    return x, y.unsqueeze(1)


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # small and polite on a shared machine
    run = tidal.init(project=args.project, experiment=args.experiment, name=f"mlp-h{args.hidden}-lr{args.lr:g}",
                     params={k: v for k, v in vars(args).items() if k not in ("project", "experiment")})
    print(f"logging to {run!r}", flush=True)

    model = nn.Sequential(nn.Linear(args.features, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    target = torch.randn(args.features) / math.sqrt(args.features)
    started = window_start = time.monotonic()
    step = window_samples = 0
    while (elapsed := time.monotonic() - started) < args.seconds:
        lr = args.lr * 0.5 * (1 + math.cos(math.pi * elapsed / args.seconds))
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = synthetic_batch(target, args.batch_size)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
        optimizer.step()
        window_samples += args.batch_size
        if step % args.log_every == 0:
            now = time.monotonic()
            tidal.log({"loss": loss.item(), "lr": lr, "grad_norm": grad_norm.item(),
                       "samples_per_s": window_samples / max(now - window_start, 1e-9)}, step=step)
            window_start, window_samples = now, 0
        if step % 1000 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
        step += 1
    print(f"done after {step} steps", flush=True)
    tidal.finish()


if __name__ == "__main__":
    main()
