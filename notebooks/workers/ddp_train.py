"""Train the digits MLP with DistributedDataParallel: single_train.py, made distributed.

Run: ``torchrun --standalone --nproc-per-node=2 ddp_train.py --out DIR``.  Lines marked
``# DDP`` are the changes from single_train.py.
"""

import argparse
import json
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import accelkit as ak

SEED = 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="samples per micro-batch (global)")
    ap.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--out", type=Path, required=True, help="folder for log and checkpoint")
    args = ap.parse_args(argv)  # argv: None = the command line
    with ak.dist.session() as info:  # DDP: the process group first (gloo on CPU, NCCL on GPUs)
        train(args, info)  # DDP: the group is torn down after it, also when it raises


def train(args: argparse.Namespace, info: ak.dist.RankInfo) -> None:  # DDP: + rank info
    if args.batch % info.world_size:  # DDP
        raise ValueError(f"--batch {args.batch} must be divisible by {info.world_size} ranks")

    torch.manual_seed(SEED)
    d = ak.data.digits()
    ds = TensorDataset(torch.from_numpy(d.x_train.reshape(len(d.x_train), -1)),  # (N, 64)
                       torch.from_numpy(d.y_train))                                # (N,)
    sampler = DistributedSampler(ds, shuffle=True, seed=SEED, drop_last=True)  # DDP: 1/N each
    loader = DataLoader(ds, batch_size=args.batch // info.world_size,  # DDP: per-worker batch
                        sampler=sampler, drop_last=True)
    device = info.device  # DDP: this rank's device (cuda:LOCAL_RANK, or the CPU)
    model = DDP(ak.models.torch_mlp().to(device))  # DDP: same init, wrapped after .to()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    steps = len(loader) // args.accum * args.accum  # whole optimizer steps only

    losses = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # DDP: a new, reproducible order every epoch
        total = torch.zeros((), device=device)
        for i, (x, y) in zip(range(steps), loader):
            x, y = x.to(device), y.to(device)
            sync = (i + 1) % args.accum == 0
            with nullcontext() if sync else model.no_sync():  # DDP: all-reduce once per step
                loss = nn.functional.cross_entropy(model(x), y)
                (loss / args.accum).backward()  # gradients add up over the micro-batches
            if sync:
                opt.step()
                opt.zero_grad()
            total += loss.detach()
        dist.all_reduce(total)  # DDP: the mean over all ranks' micro-batches
        losses.append(total.item() / steps / info.world_size)
        ak.dist.print0(f"epoch {epoch}: loss {losses[-1]:.4f}")  # DDP: log on rank 0 only

    replica_diff = ak.dist.replica_max_abs_diff(model)  # DDP: all replicas must agree
    if info.is_main:  # DDP: one checkpoint, from rank 0, of the unwrapped model
        args.out.mkdir(parents=True, exist_ok=True)
        torch.save(model.module.state_dict(), args.out / "model.pt")
        (args.out / "log.json").write_text(json.dumps({
            "losses": losses, "world_size": info.world_size, "replica_max_abs_diff": replica_diff,
            "per_worker_batch": args.batch // info.world_size, "backend": info.backend}))


if __name__ == "__main__":
    main()
