"""Notebook 06's DDP rung: the small GPT on N ranks, gradient accumulation with and without no_sync.

Run: ``torchrun --standalone --nproc-per-node=2 gpt_ddp.py --out gpt_ddp.json`` (the
notebook launches it through ``ak.launch``).  Every rank builds the same model (same seed)
and cuts the same global batches as the notebook (``ak.models.batches``); rank r trains on rows
``r::N`` of each, in ``--accum`` micro-batches.  The worker

1. counts the gradient all-reduces DDP starts (a communication hook that counts, then calls
   DDP's own all-reduce hook), over ``--steps`` steps, with and without ``no_sync()`` on the
   first k - 1 micro-batches: k all-reduces per bucket and step without it, 1 with it;
2. reports the validation loss after those steps (both ways), which the notebook
   compares with its single-process baseline: the same global batch, the same gradient;
3. times a step both ways, and once more with every micro-batch under ``no_sync()`` (no
   communication at all: the compute alone, for the scaling efficiency).
"""

import argparse

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import accelkit as ak
from accelkit import gpt, models


def counting_allreduce(state: dict, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: count the all-reduce, then do it as DDP would (mean over ranks).

    ``calls`` counts every bucket's all-reduce; ``rounds`` one per synchronising backward
    pass (its last bucket).  DDP re-buckets after the first iteration, so ``calls`` per pass
    can change once; ``rounds`` cannot.
    """
    state["calls"] += 1
    state["rounds"] += int(bucket.is_last())
    return default_hooks.allreduce_hook(None, bucket)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--embd", type=int, default=128)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16, help="global batch per optimizer step")
    ap.add_argument("--accum", type=int, default=4, help="micro-batches per step and rank")
    ap.add_argument("--steps", type=int, default=6, help="steps for the count and the loss")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)  # argv: None = the command line
    with ak.dist.session() as info:  # the group is torn down even when run() raises
        run(args, info)


def build(args: argparse.Namespace, info: ak.dist.RankInfo, state: dict) -> DDP:
    cfg = gpt.GPTConfig(n_layer=args.layers, n_head=args.heads, n_embd=args.embd,
                        block_size=args.seq, attention="sdpa")
    torch.manual_seed(args.seed)  # the same initial weights as the notebook's baseline
    model = DDP(gpt.GPT(cfg).to(info.device))
    model.register_comm_hook(state, counting_allreduce)
    return model


def run(args: argparse.Namespace, info: ak.dist.RankInfo) -> None:
    n, r = info.world_size, info.rank
    if args.batch % (n * args.accum):
        raise ValueError(f"--batch {args.batch} must divide into {n} ranks x {args.accum} "
                         "micro-batches")
    train, val = models.load_corpus().split()
    full = models.batches(train, args.steps, args.batch, args.seq, seed=args.seed)
    mine = [(x[r::n], y[r::n]) for x, y in full]  # this rank's rows of each global batch
    val_batch = models.batches(val, 1, args.batch, args.seq, seed=args.seed + 1)[0]
    result: dict = {"world_size": n, "accum": args.accum, "steps": args.steps,
                    "tokens_per_step": args.batch * args.seq}
    for sync_each in (True, False):  # without no_sync, then with it
        state = {"calls": 0, "rounds": 0}
        model = build(args, info, state)
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
        step = gpt.Stepper(model, opt, mine, accum=args.accum, device=info.device,
                           no_sync=None if sync_each else model.no_sync)
        losses = step.train(args.steps)
        key = "sync_every_micro_batch" if sync_each else "no_sync"
        result[f"allreduces_{key}"] = state["rounds"]
        result[f"allreduce_calls_{key}"] = state["calls"]
        result[f"train_losses_{key}"] = losses
        val = tuple(t.to(info.device) for t in val_batch)
        result[f"val_loss_{key}"] = gpt.evaluate(model.module, val)  # before any timing step
        result[f"step_s_{key}"] = ak.comm.time_collective(step, number=1, warmup=1,
                                                    repeats=args.repeats).median_s

    def compute_only() -> None:  # every micro-batch under no_sync: no all-reduce at all
        with model.no_sync():
            for xm, ym in zip(*(t.to(info.device).chunk(args.accum) for t in mine[0])):
                (model(xm, ym)[1] / args.accum).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    result["step_s_compute_only"] = ak.comm.time_collective(compute_only, number=1,
                                                      warmup=1, repeats=args.repeats).median_s
    ak.dist.save_json(result, args.out)
    ak.dist.print0(f"{n} ranks x {args.accum} micro-batches: all-reduces "
                   f"{result['allreduces_sync_every_micro_batch']} without no_sync, "
                   f"{result['allreduces_no_sync']} with it; val loss {result['val_loss_no_sync']:.4f}")


if __name__ == "__main__":
    main()
