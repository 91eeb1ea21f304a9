"""Train the digits MLP with DistributedDataParallel: single_train.py, made distributed.

Run: ``torchrun --standalone --nproc-per-node=2 ddp_train.py --out DIR``.  Lines marked
``# DDP`` are the changes from single_train.py.
"""

import argparse
import json
import os
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import accelkit as ak

SEED = 0


@record  # DDP: a failing rank's traceback goes to torchrun's per-rank error file
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="samples per micro-batch (global)")
    ap.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--out", type=Path, required=True, help="folder for log and checkpoint")
    args = ap.parse_args(argv)  # argv: None = the command line
    local_rank = int(os.environ["LOCAL_RANK"])  # DDP: torchrun sets RANK, LOCAL_RANK, WORLD_SIZE
    cuda = torch.cuda.is_available()  # DDP: one GPU per process, else the CPU
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")  # DDP
    if cuda:  # DDP
        torch.cuda.set_device(device)  # DDP
    dist.init_process_group("nccl" if cuda else "gloo")  # DDP: the process group first
    try:  # DDP
        train(args, device)  # DDP: + this rank's device
        dist.barrier()  # DDP: every rank is done before any tears its connections down
    finally:  # DDP
        dist.destroy_process_group()  # DDP: teardown, also when train raises


def train(args: argparse.Namespace, device: torch.device) -> None:  # DDP: + device
    rank, world_size = dist.get_rank(), dist.get_world_size()  # DDP
    if args.batch % world_size:  # DDP
        raise ValueError(f"--batch {args.batch} must be divisible by {world_size} ranks")

    torch.manual_seed(SEED)
    d = ak.models.digits()
    ds = TensorDataset(torch.from_numpy(d.x_train.reshape(len(d.x_train), -1)),  # (N, 64)
                       torch.from_numpy(d.y_train))                                # (N,)
    sampler = DistributedSampler(ds, shuffle=True, seed=SEED, drop_last=True)  # DDP: 1/N each
    loader = DataLoader(ds, batch_size=args.batch // world_size,  # DDP: per-worker batch
                        sampler=sampler, drop_last=True)
    model = DDP(ak.models.torch_mlp().to(device))  # DDP: same init, wrapped after .to()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    steps = len(loader) // args.accum * args.accum  # whole optimizer steps only

    # region loop
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
        losses.append(total.item() / steps / world_size)
        if rank == 0:  # DDP: log on rank 0 only
            print(f"epoch {epoch}: loss {losses[-1]:.4f}", flush=True)
    # endregion

    replica_diff = ak.dist.replica_max_abs_diff(model)  # DDP: all replicas must agree
    if rank == 0:  # DDP: one checkpoint, from rank 0, of the unwrapped model (FSDP2: gather first)
        args.out.mkdir(parents=True, exist_ok=True)
        torch.save(model.module.state_dict(), args.out / "model.pt")
        (args.out / "log.json").write_text(json.dumps({
            "losses": losses, "world_size": world_size, "replica_max_abs_diff": replica_diff,
            "per_worker_batch": args.batch // world_size, "backend": dist.get_backend()}))


if __name__ == "__main__":
    main()
