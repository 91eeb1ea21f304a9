"""Train the digits MLP in one process: the script that ddp_train.py turns into DDP.

Run: ``python single_train.py --out DIR`` (notebook 04 imports it and calls ``main``).
"""

import argparse
import json
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

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
    train(args)


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(SEED)
    d = ak.models.digits()
    ds = TensorDataset(torch.from_numpy(d.x_train.reshape(len(d.x_train), -1)),  # (N, 64)
                       torch.from_numpy(d.y_train))                                # (N,)
    order = torch.Generator()
    loader = DataLoader(ds, batch_size=args.batch,
                        sampler=RandomSampler(ds, generator=order), drop_last=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = ak.models.torch_mlp().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    steps = len(loader) // args.accum * args.accum  # whole optimizer steps only

    # region loop
    losses = []
    for epoch in range(args.epochs):
        order.manual_seed(SEED + epoch)  # a new, reproducible order every epoch
        total = torch.zeros((), device=device)
        for i, (x, y) in zip(range(steps), loader):
            x, y = x.to(device), y.to(device)
            loss = nn.functional.cross_entropy(model(x), y)
            (loss / args.accum).backward()  # gradients add up over the micro-batches
            if (i + 1) % args.accum == 0:
                opt.step()
                opt.zero_grad()
            total += loss.detach()
        losses.append(total.item() / steps)
        print(f"epoch {epoch}: loss {losses[-1]:.4f}", flush=True)
    # endregion

    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), args.out / "model.pt")
    (args.out / "log.json").write_text(json.dumps({"losses": losses, "world_size": 1}))


if __name__ == "__main__":
    main()
