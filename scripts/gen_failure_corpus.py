"""Generate the labelled corpus of failed attempts in tests/data/failures/ (one JSON-lines file per labelled cause).

Each case is what Tidal keeps of a failed attempt: the pod's termination (phase, container reason, exit code,
message), the replicas' last log lines (with the noise real training logs carry: step lines, NCCL INFO lines,
warnings, progress bars), DCGM Xid events, node conditions, Kubernetes events, tracking alerts and the run's
progress, and the attempt's outcome. The label is the root cause a person would give after reading all of it (so an
NCCL timeout whose node's GPU fell off the bus 40 s earlier is labelled xid_bus, not nccl_timeout).

The cases are built from templates of real failure output (PyTorch, NCCL, CUDA, the kernel's NVRM lines, kubelet
reasons), varied with a seeded random generator: ranks, hosts, sizes, tensor shapes, file names, exception texts,
the amount and kind of noise, and which sources are present at all (a backend that kept no logs, a DCGM exporter
that was not scraped). Some cases are hard on purpose (several sources pointing different ways, the root cause only
in one of them); a few are ambiguous enough that a classifier should miss them.

    .venv/bin/python scripts/gen_failure_corpus.py [--seed 28] [--per-class 13] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "failures"

HOSTS = [f"gpu-{i:03d}" for i in range(1, 97)] + [f"dgx-h100-{r}{i}" for r in "abcd" for i in range(1, 9)]
MODELS = ["llama-7b", "llama-70b", "mixtral-8x7b", "gpt-neox-20b", "bert-large", "vit-h14", "t5-xl", "qwen-14b"]
DATASETS = ["c4", "redpajama", "the-pile", "fineweb-edu", "laion-400m", "wiki-103", "openwebtext"]
TRAIN_FILES = ["train.py", "pretrain_gpt.py", "finetune.py", "run_clm.py", "main.py", "trainer/loop.py"]


class Case:
    def __init__(self, rng: random.Random, label: str, number: int) -> None:
        self.rng = rng
        self.label = label
        self.id = f"{label}-{number:03d}"
        self.world = rng.choice([8, 16, 32, 64, 128, 256])
        self.rank = rng.randrange(self.world)
        self.node = rng.choice(HOSTS)
        self.pod = {"phase": "Failed", "reason": "Error", "exit_code": 1, "message": ""}
        self.logs: dict[str, list[str]] = {}
        self.xid_events: list[dict] = []
        self.node_conditions: list[dict] = []
        self.k8s_events: list[str] = []
        self.alerts: list[str] = []
        self.progress: list[str] = []
        self.outcome = "failed"
        self.cause = ""  # a cause only Tidal decides (max_runtime), as the attempt row keeps it

    def replica(self, index: int | None = None) -> str:
        return f"worker-{self.rank // 8 if index is None else index}"

    def noise(self, n: int | None = None) -> list[str]:
        rng = self.rng
        step = rng.randrange(10, 90000)
        lines = []
        for _ in range(n if n is not None else rng.randrange(0, 25)):
            kind = rng.random()
            step += rng.randrange(1, 20)
            if kind < 0.45:
                lines.append(f"[rank{rng.randrange(self.world)}]: step {step} | loss {rng.uniform(1.5, 4):.4f} | lr "
                             f"{rng.uniform(1e-5, 3e-4):.2e} | grad_norm {rng.uniform(0.2, 3):.3f} | tokens/s "
                             f"{rng.randrange(80000, 400000)}")
            elif kind < 0.6:
                lines.append(f"{self.node}:{rng.randrange(1000, 99999)}:{rng.randrange(1000, 99999)} "
                             f"[{rng.randrange(8)}] NCCL INFO Channel {rng.randrange(32):02d}/0 : {rng.randrange(64)}"
                             f"[{rng.randrange(8)}] -> {rng.randrange(64)}[{rng.randrange(8)}] via P2P/IPC/read")
            elif kind < 0.7:
                lines.append(f"{rng.randrange(20, 99)}%|{'#' * rng.randrange(1, 30):<30}| {rng.randrange(1, 9999)}/"
                             f"10000 [{rng.randrange(0, 59):02d}:{rng.randrange(0, 59):02d}<{rng.randrange(1, 9)}:"
                             f"{rng.randrange(0, 59):02d}, {rng.uniform(1, 9):.2f}it/s]")
            elif kind < 0.8:
                lines.append(rng.choice([
                    "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: UserWarning: "
                    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.",
                    "FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                    "`torch.amp.GradScaler('cuda', args...)` instead.",
                    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [::ffff:10.0.0.1]:29500 "
                    "(errno: 99 - Cannot assign requested address).",
                    "wandb: WARNING Step must only increase in log calls.",
                    "INFO:root:Saving checkpoint to /checkpoints/step_0012000 ...",
                    "Token indices sequence length is longer than the specified maximum sequence length for this "
                    "model (4123 > 4096).",
                ]))
            else:
                lines.append(f"{self.node}:{rng.randrange(1000, 99999)}:{rng.randrange(1000, 99999)} "
                             f"[{rng.randrange(8)}] NCCL INFO comm 0x{rng.randrange(16**8):08x} rank "
                             f"{rng.randrange(self.world)} nRanks {self.world} nNodes {self.world // 8} localRanks 8 "
                             "localRank 0 MNNVL 0 - Init COMPLETE")
        return lines

    def log(self, lines: list[str], replica: str | None = None, *, noise_before: bool = True,
            noise_after: int = 0) -> None:
        where = replica or self.replica()
        body = (self.noise() if noise_before else []) + lines + self.noise(noise_after)
        self.logs.setdefault(where, []).extend(body)

    def traceback(self, frames: list[tuple[str, int, str, str]], exception: str, prefix: str = "") -> list[str]:
        lines = [f"{prefix}Traceback (most recent call last):"]
        for file, line, func, code in frames:
            lines += [f'{prefix}  File "{file}", line {line}, in {func}', f"{prefix}    {code}"]
        return lines + [f"{prefix}{exception}"]

    def user_frames(self) -> list[tuple[str, int, str, str]]:
        rng = self.rng
        file = f"/workspace/{rng.choice(TRAIN_FILES)}"
        return [(file, rng.randrange(300, 900), "<module>", "main()"),
                (file, rng.randrange(100, 300), "main", "trainer.train()"),
                (f"/workspace/{rng.choice(['model.py', 'modeling.py', 'layers/attention.py'])}",
                 rng.randrange(20, 500), rng.choice(["forward", "compute_loss", "train_step"]),
                 rng.choice(["logits = self.lm_head(hidden)", "loss = self.criterion(out, batch['labels'])",
                             "attn = q @ k.transpose(-2, -1)"]))]

    def as_dict(self) -> dict:
        return {"id": self.id, "label": self.label, "node": self.node, "pod": self.pod, "logs": self.logs,
                "xid_events": self.xid_events, "node_conditions": self.node_conditions,
                "k8s_events": self.k8s_events, "alerts": self.alerts, "progress": self.progress,
                "outcome": self.outcome, "cause": self.cause}


def _prefix(c: Case) -> str:
    return c.rng.choice(["", f"[rank{c.rank}]: ", f"[default{c.rank}]:"])


def nccl_timeout_lines(c: Case) -> list[str]:
    rng = c.rng
    op = rng.choice(["ALLREDUCE", "ALLGATHER", "REDUCE_SCATTER", "BROADCAST", "_ALLGATHER_BASE"])
    ms = rng.choice([600000, 1800000, 300000])
    return [f"[rank{c.rank}]:[E{rng.randrange(1000, 9999)} {rng.randrange(10, 23)}:{rng.randrange(10, 59)}:"
            f"{rng.randrange(10, 59)}.{rng.randrange(100000, 999999)} {rng.randrange(1000, 9999)} "
            f"ProcessGroupNCCL.cpp:{rng.choice([616, 632, 1375])}] [Rank {c.rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={rng.randrange(100, 90000)}, OpType={op}, NumelIn="
            f"{rng.randrange(10**5, 10**9)}, NumelOut={rng.randrange(10**5, 10**9)}, Timeout(ms)={ms}) ran for "
            f"{ms + rng.randrange(1, 900)} milliseconds before timing out.",
            f"[rank{c.rank}]:[E ProcessGroupNCCL.cpp:{rng.choice([1413, 577])}] [PG 0 Rank {c.rank}] Some NCCL "
            "operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
            "operations might run on corrupted/incomplete data.",
            f"[rank{c.rank}]:[E ProcessGroupNCCL.cpp:{rng.choice([583, 1419])}] [Rank {c.rank}] To avoid data "
            "inconsistency, we are taking the entire process down."]


def xid_event(c: Case, xid: int, before: int | None = None) -> dict:
    messages = {79: "GPU has fallen off the bus.", 48: "DBE (Double Bit Error) ECC Error",
                63: "Row remapping event: pending", 64: "Row remapping failure", 94: "Contained ECC error",
                95: "Uncontained ECC error", 74: "NVLINK Error. Check the link", 13: "Graphics Engine Exception",
                31: "GPU memory page fault", 43: "GPU stopped processing", 92: "High single-bit ECC error rate"}
    event = {"xid": xid, "node": c.node, "gpu": c.rng.randrange(8), "message": messages.get(xid, "")}
    if before is not None:
        event["seconds_before_end"] = before
    return event


def nvrm(c: Case, xid: int) -> str:
    bus = f"0000:{c.rng.choice(['18', '3b', '5e', '86', 'af', 'd8'])}:00"
    tails = {79: "GPU has fallen off the bus.", 48: "DBE (Double Bit Error) ECC Error",
             74: "NVLink: fatal error detected on link 3(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
             94: "Contained: SM (0x1). RST: No, D-RST: No", 95: "Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No",
             63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
             13: "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address",
             43: "pid=1234, name=python, Ch 00000010"}
    return f"[{c.rng.uniform(1e5, 9e6):.6f}] NVRM: Xid (PCI:{bus}): {xid}, pid={c.rng.randrange(1000, 99999)}, " \
           f"name=python, {tails.get(xid, '')}"


# ------------------------------------------------------------------------------------------------ per class

def user_error(c: Case) -> None:
    rng = c.rng
    if rng.random() < 0.25:  # an error in the user's collate function, raised through the DataLoader
        c.log(c.traceback(c.user_frames()[:1], "RuntimeError: Caught RuntimeError in DataLoader worker process "
                          f"{rng.randrange(8)}.", _prefix(c)) + c.traceback(
            [("/usr/lib/python3/dist-packages/torch/utils/data/_utils/collate.py", 141, "default_collate",
              "return torch.stack(batch, 0, out=out)")],
            f"RuntimeError: stack expects each tensor to be equal size, but got [{rng.randrange(100, 999)}] at entry "
            f"0 and [{rng.randrange(100, 999)}] at entry {rng.randrange(1, 9)}"))
        return
    exception = rng.choice([
        "KeyError: 'input_ids'", "AttributeError: 'NoneType' object has no attribute 'shape'",
        f"RuntimeError: mat1 and mat2 shapes cannot be multiplied ({rng.randrange(2, 64)}x{rng.randrange(512, 8192)} "
        f"and {rng.randrange(512, 8192)}x{rng.randrange(512, 8192)})",
        "TypeError: forward() got an unexpected keyword argument 'attention_mask'",
        "ValueError: Expected input batch_size (16) to match target batch_size (32).",
        "IndexError: index out of range in self", "NameError: name 'scheduler' is not defined",
        "AssertionError: sequence length must be divisible by the tensor parallel size",
        "ModuleNotFoundError: No module named 'flash_attn'",
        "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        "ZeroDivisionError: division by zero",
    ])
    prefix = _prefix(c)
    c.log(c.traceback(c.user_frames(), exception, prefix), noise_after=rng.randrange(0, 3))
    if rng.random() < 0.4:  # torchrun's summary after the child failed
        c.log(["ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: "
               f"{rng.randrange(100, 9999)}) of binary: /usr/bin/python", "torch.distributed.elastic.multiprocessing."
               "errors.ChildFailedError:"], noise_before=False)
    c.pod["exit_code"] = rng.choice([1, 1, 1, 2])
    if rng.random() < 0.2:  # the other ranks only saw their peer go
        c.log(["[W socket.cpp:464] [c10d] The server socket has failed to listen on any local network address."],
              replica="worker-1")


def cuda_oom(c: Case) -> None:
    rng = c.rng
    if rng.random() < 0.12:  # hard: the backend kept another rank's log, which only saw the collective time out
        c.log(nccl_timeout_lines(c))
        c.alerts.append(f"throughput_drop: tokens/s fell to {rng.randrange(100, 900)}")
        return
    gib = rng.choice([0.5, 1.0, 2.0, 4.0, 8.0, 20.0])
    total = rng.choice([79.15, 39.39, 23.65, 79.1])
    exception = rng.choice([
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {gib:.2f} GiB. GPU {rng.randrange(8)} has a "
        f"total capacity of {total} GiB of which {rng.uniform(0.01, 1.5):.2f} GiB is free. Including non-PyTorch "
        f"memory, this process has {total - 1:.2f} GiB memory in use.",
        f"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate {int(gib * 1024)}.00 MiB (GPU 0; "
        f"{total} GiB total capacity; {total - 2:.2f} GiB already allocated; 0 bytes free)",
        "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some other "
        "API call, so the stacktrace below might be incorrect.",
        "RuntimeError: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    ])
    c.log(c.traceback(c.user_frames(), exception.split("\n")[0], _prefix(c)) + exception.split("\n")[1:])
    if rng.random() < 0.35:  # its peers then fail on the collective
        c.log(nccl_timeout_lines(c)[:1], replica="worker-1")


def host_oom(c: Case) -> None:
    rng = c.rng
    if rng.random() < 0.2:  # the kubelet's reason was not kept: only the SIGKILL's exit code and the dying words
        c.pod.update(reason="Error", exit_code=137)
        c.log([f"/bin/bash: line 1: {rng.randrange(10, 999)} Killed                  torchrun --nproc_per_node=8 "
               "train.py"])
        return
    c.pod.update(reason="OOMKilled", exit_code=137, message="")
    if rng.random() < 0.5:
        c.log([f"RuntimeError: DataLoader worker (pid {rng.randrange(1000, 9999)}) is killed by signal: Killed. "],
              noise_after=0)
    else:
        c.log([])
    if rng.random() < 0.3:
        c.k8s_events.append(f"Memory cgroup out of memory: Killed process {rng.randrange(1000, 99999)} (python)")


def nccl_timeout(c: Case) -> None:
    c.log(nccl_timeout_lines(c))
    if c.rng.random() < 0.5:
        c.log(c.traceback([("/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", 2288,
                            "all_reduce", "work = group.allreduce([tensor], opts)")],
                          "torch.distributed.DistBackendError: NCCL communicator was aborted on rank "
                          f"{c.rank}.", _prefix(c)), noise_before=False)
    c.pod["exit_code"] = c.rng.choice([1, 134, -6 % 256])
    if c.rng.random() < 0.3:
        c.progress.append(f"no new step for {c.rng.randrange(90, 500)} s after step {c.rng.randrange(100, 9000)} "
                          f"(recent step time {c.rng.uniform(1, 20):.1f} s; bound 60 s)")


def nccl(c: Case) -> None:
    rng = c.rng
    if rng.random() < 0.15:  # hard: the network plugin crashed the process
        c.log([f"{c.node}:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin (v7)",
               f"{c.node}:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>",
               "Segmentation fault (core dumped)"])
        c.pod.update(exit_code=139)
        return
    peer = f"10.{rng.randrange(255)}.{rng.randrange(255)}.{rng.randrange(255)}<{rng.randrange(40000, 60000)}>"
    line = rng.choice([
        f"{c.node}:{rng.randrange(1000, 9999)}:{rng.randrange(1000, 9999)} [{rng.randrange(8)}] transport/net_ib.cc:"
        f"1295 NCCL WARN NET/IB : Got completion from peer {peer} with error 12, opcode 0, len 0, vendor err 129 "
        "(Recv) localGid ::ffff:10.0.0.1 remoteGidsfe80::1",
        f"{c.node}:{rng.randrange(1000, 9999)}:{rng.randrange(1000, 9999)} [0] misc/socket.cc:{rng.randrange(40, 600)}"
        " NCCL WARN Net : Connection closed by remote peer",
        f"{c.node}:{rng.randrange(1000, 9999)}:{rng.randrange(1000, 9999)} [3] NCCL WARN Call to ibv_modify_qp failed "
        "with error Connection timed out",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
        "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
        "store by key '0', but store->get('0') got error: Connection reset by peer",
    ])
    c.log([line] + (["Last error:", f"NET/IB : Got completion from peer {peer} with status=IBV_WC_RETRY_EXC_ERR(12) "
                     "opcode=0 len=0 vendor_err=129"] if rng.random() < 0.4 else []))
    c.pod["exit_code"] = 1


def xid_bus(c: Case) -> None:
    before = c.rng.randrange(5, 120)
    if c.rng.random() < 0.8:
        c.xid_events.append(xid_event(c, 79, before))
    else:
        c.log([nvrm(c, 79)], noise_before=False)
    c.log(nccl_timeout_lines(c) if c.rng.random() < 0.6 else [
        "RuntimeError: CUDA error: unspecified launch failure", "CUDA kernel errors might be asynchronously reported"])
    if c.rng.random() < 0.3:
        c.node_conditions.append({"node": c.node, "condition": "Ready=False"})
        c.outcome = "lost"


def xid_memory(c: Case) -> None:
    xid = c.rng.choice([48, 48, 94, 95, 63, 64])
    if c.rng.random() < 0.75:
        c.xid_events.append(xid_event(c, xid, c.rng.randrange(1, 60)))
    else:
        c.log([nvrm(c, xid)], noise_before=False)
    c.log(c.rng.choice([["RuntimeError: CUDA error: uncorrectable ECC error encountered"],
                        ["RuntimeError: CUDA error: an illegal memory access was encountered"],
                        nccl_timeout_lines(c)[:1], []]))


def xid_nvlink(c: Case) -> None:
    if c.rng.random() < 0.75:
        c.xid_events.append(xid_event(c, 74, c.rng.randrange(1, 90)))
    else:
        c.log([nvrm(c, 74)], noise_before=False)
    c.log(nccl_timeout_lines(c)[:2] if c.rng.random() < 0.7 else [
        f"{c.node}:1:1 [2] NCCL WARN Cuda failure 'an illegal memory access was encountered'"])


def xid_app(c: Case) -> None:
    xid = c.rng.choice([13, 31, 43])
    if c.rng.random() < 0.7:
        c.xid_events.append(xid_event(c, xid, c.rng.randrange(0, 10)))
    else:
        c.log([nvrm(c, xid)], noise_before=False)
    c.log(c.traceback(c.user_frames(), c.rng.choice([
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "RuntimeError: CUDA error: unspecified launch failure",
        "RuntimeError: CUDA error: misaligned address"]), _prefix(c)))


def hang(c: Case) -> None:
    step = c.rng.randrange(100, 90000)
    st = c.rng.uniform(0.5, 30)
    c.progress.append(f"no new step for {c.rng.randrange(61, 400)} s after step {step} (recent step time {st:.1f} s; "
                      f"bound {max(60, 2 * st):.0f} s)")
    c.log([f"[rank{c.rank}]: step {step} | loss {c.rng.uniform(1.5, 3):.4f}"])
    c.pod.update(reason="", exit_code=None, phase="Running")  # restarted by Tidal while its pods still ran
    c.cause = "hang"


def loss_nan(c: Case) -> None:
    rng = c.rng
    step = rng.randrange(1000, 90000)
    if rng.random() < 0.6:
        c.alerts.append(f"non_finite: train/loss is NaN at step {step}")
    lines = rng.choice([
        [f"[rank0]: step {step} | loss nan | lr 3.00e-04 | grad_norm nan"],
        [f"step {step}: loss=nan", "FloatingPointError: Loss is NaN at step " + str(step)],
        [f"[rank0]: step {step} | loss inf", "RuntimeError: Loss became non-finite loss (inf), stopping training"],
        [f"step {step} loss 2.31", "Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 1.0",
         "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."],
    ])
    c.log(lines)
    if rng.random() < 0.3:
        c.alerts.append(f"grad_norm_explosion: grad_norm {rng.uniform(1e3, 1e6):.0f} at step {step - 3}")


def data_error(c: Case) -> None:
    rng = c.rng
    suffix = rng.choice(["arrow", "bin", "jsonl"])
    shard = f"/datasets/{rng.choice(DATASETS)}/shard-{rng.randrange(100000):05d}.{suffix}"
    exception = rng.choice([
        f"OSError: [Errno 5] Input/output error: '{shard}'",
        f"FileNotFoundError: [Errno 2] No such file or directory: '{shard}'",
        f"OSError: [Errno 116] Stale file handle: '{shard}'",
        "botocore.exceptions.ReadTimeoutError: Read timeout on endpoint URL: \"https://s3.us-east-1.amazonaws.com/"
        f"{rng.choice(DATASETS)}/part-{rng.randrange(9999):04d}.parquet\"",
        f"RuntimeError: DataLoader worker (pid {rng.randrange(1000, 99999)}) exited unexpectedly with exit code 1. "
        "Details are lost due to multiprocessing.",
        f"pyarrow.lib.ArrowInvalid: Parquet magic bytes not found in footer. Either the file is corrupted or this is "
        f"not a parquet file: {shard}",
        "OSError: [Errno 28] No space left on device",
    ])
    frames = [("/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", 1344, "_next_data",
               "return self._process_data(data)")]
    c.log(c.traceback(c.user_frames()[:1] + frames, exception, _prefix(c)))


def image_pull(c: Case) -> None:
    tag = c.rng.choice(["v1.2", "latest", "nightly"])
    image = f"registry.example.com/{c.rng.choice(['ml', 'research'])}/train:{tag}"
    c.pod.update(phase="Pending", reason=c.rng.choice(["ErrImagePull", "ImagePullBackOff", "InvalidImageName"]),
                 exit_code=None, message=f'Back-off pulling image "{image}"')
    c.k8s_events.append(c.rng.choice([f'Failed to pull image "{image}": rpc error: code = NotFound desc = manifest '
                                      'unknown', f'Failed to pull image "{image}": pull access denied']))


def invalid_spec(c: Case) -> None:
    rng = c.rng
    if rng.random() < 0.7:
        c.pod.update(phase="Pending", reason="CreateContainerConfigError", exit_code=None,
                     message=rng.choice(['secret "hf-token" not found', 'configmap "train-config" not found',
                                         "couldn't find key WANDB_API_KEY in Secret ml/wandb"]))
        c.k8s_events.append(f"Error: {c.pod['message']}")
    else:
        c.pod.update(reason="StartError", exit_code=128)
        c.log(['OCI runtime create failed: runc create failed: unable to start container process: exec: "torchrun": '
               'executable file not found in $PATH: unknown'], noise_before=False)


def node_lost(c: Case) -> None:
    c.outcome = "lost"
    c.pod.update(reason=c.rng.choice(["NodeLost", "DeletionByPodGC", "TerminationByKubelet", ""]), exit_code=None)
    if c.rng.random() < 0.6:
        c.node_conditions.append({"node": c.node, "condition": c.rng.choice(["Ready=Unknown", "Ready=False"])})
    if c.rng.random() < 0.4:
        c.k8s_events.append(f"Node {c.node} status is now: NodeNotReady")
    c.log([], noise_before=c.rng.random() < 0.7)


def preempted(c: Case) -> None:
    c.outcome = "preempted" if c.rng.random() < 0.5 else "failed"
    c.pod.update(reason=c.rng.choice(["PreemptionByScheduler", "EvictionByEvictionAPI", "Preempting"]),
                 exit_code=c.rng.choice([143, None]))
    c.log(["Received SIGTERM, saving checkpoint..."] if c.rng.random() < 0.5 else [])


def cancelled(c: Case) -> None:
    c.outcome = "cancelled"
    c.pod.update(reason="", exit_code=c.rng.choice([143, None]))
    c.log([])


def max_runtime(c: Case) -> None:
    c.cause = "max_runtime"
    c.pod.update(phase="Running", reason="", exit_code=None)
    c.log([])


GENERATORS: dict[str, Callable[[Case], None]] = {
    "user_error": user_error, "cuda_oom": cuda_oom, "host_oom": host_oom, "nccl_timeout": nccl_timeout,
    "nccl": nccl, "xid_bus": xid_bus, "xid_memory": xid_memory, "xid_nvlink": xid_nvlink, "xid_app": xid_app,
    "hang": hang, "loss_nan": loss_nan, "data_error": data_error, "image_pull": image_pull,
    "invalid_spec": invalid_spec, "node_lost": node_lost, "preempted": preempted, "cancelled": cancelled,
    "max_runtime": max_runtime,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--per-class", type=int, default=13)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rng = random.Random(args.seed)  # noqa: S311  (test data, reproducible)
    args.out.mkdir(parents=True, exist_ok=True)
    total = 0
    for label, generate in GENERATORS.items():
        with (args.out / f"{label}.jsonl").open("w") as out:
            for number in range(1, args.per_class + 1):
                case = Case(rng, label, number)
                generate(case)
                out.write(json.dumps(case.as_dict(), sort_keys=True) + "\n")
                total += 1
    print(f"{total} cases in {args.out}")


if __name__ == "__main__":
    main()
