"""FSDP2 in practice: mixed precision, ``reshard_after_forward``, saving and resuming.

Run: ``torchrun --standalone --nproc-per-node=2 fsdp_checkpoint.py --ckpt DIR --out r.json``.

1. Train ``--steps`` steps of an MLP sharded with ``fully_shard`` (fp32), saving a
   ``torch.distributed.checkpoint`` (DCP) checkpoint of the model and optimizer after
   ``--steps // 2`` of them; every rank writes its own shards.
2. Resume on the same ranks: a fresh model (other weights), a fresh optimizer, the
   checkpoint loaded into both; train the remaining steps.  Their losses must be identical
   to the uninterrupted run's.  (The notebook resumes the same checkpoint in one process.)
3. The wrong way: rank 0's ``model.state_dict()`` holds DTensors, each with rank 0's shard
   only; ``get_model_state_dict(full_state_dict=True)`` gathers full tensors.
4. ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``: the forward computes in
   bf16, the sharded parameters and their gradients stay fp32.
5. ``reshard_after_forward`` True vs False: the bytes of unsharded parameters held between
   forward and backward.
"""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

import accelkit as ak


def build_model(width: int, layers: int, seed: int) -> nn.Sequential:
    """An MLP of ``layers`` hidden Linear+ReLU pairs; the same weights for the same seed."""
    torch.manual_seed(seed)
    mods: list[nn.Module] = [nn.Linear(64, width), nn.ReLU()]
    for _ in range(layers - 1):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods, nn.Linear(width, 10))


def batches(steps: int, batch: int, rank: int, world: int) -> list:
    """The first ``steps`` global batches of the digits, each rank's slice: (B/N, 64), (B/N,)."""
    d = ak.models.digits()
    x = torch.from_numpy(d.x_train.reshape(len(d.x_train), -1))
    y = torch.from_numpy(d.y_train)
    if steps * batch > len(x):
        raise ValueError(f"{steps} steps of {batch} need {steps * batch} samples, have {len(x)}")
    return [(x[i * batch:(i + 1) * batch].chunk(world)[rank],
             y[i * batch:(i + 1) * batch].chunk(world)[rank]) for i in range(steps)]


# region shard
def shard(model: nn.Sequential, mesh, **kw) -> nn.Sequential:
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, **kw)     # each Linear: one all-gather unit
    fully_shard(model, mesh=mesh, **kw)             # the root
    return model
# endregion


def step(model: nn.Module, opt: torch.optim.Optimizer, x, y) -> float:
    """One training step; returns the global mean loss (the mean of the ranks' losses)."""
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    avg = loss.detach().float().clone()
    dist.all_reduce(avg)
    return avg.item() / dist.get_world_size()


# region save
def save(model, opt, path) -> None:
    state = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}
    dcp.save(state, checkpoint_id=path)             # every rank writes its own shards


def load(model, opt, path) -> None:
    state = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}
    dcp.load(state, checkpoint_id=path,             # reads the shards this rank needs
             no_dist=not dist.is_initialized())     # also in one plain process
    set_model_state_dict(model, state["model"])
    set_optimizer_state_dict(model, opt, state["optim"])
# endregion


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64, help="global batch size")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--ckpt", required=True, help="folder for the DCP checkpoint")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with ak.dist.session() as info:
        run(args, info)


def run(args: argparse.Namespace, info: ak.dist.RankInfo) -> None:
    rank, world, dev = info.rank, info.world_size, info.device
    mesh = init_device_mesh(dev.type, (world,))
    data = [(x.to(dev), y.to(dev)) for x, y in batches(args.steps, args.batch, rank, world)]
    half = args.steps // 2

    # 1. train, checkpoint half-way, go on
    model = shard(build_model(args.width, args.layers, seed=0).to(dev), mesh)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    losses = []
    for i, (x, y) in enumerate(data):
        if i == half:
            save(model, opt, args.ckpt)
        losses.append(step(model, opt, x, y))

    # 2. resume on the same number of ranks: other weights, loaded from the checkpoint
    model2 = shard(build_model(args.width, args.layers, seed=1).to(dev), mesh)
    opt2 = torch.optim.Adam(model2.parameters(), lr=args.lr)
    load(model2, opt2, args.ckpt)
    resumed = [step(model2, opt2, x, y) for x, y in data[half:]]

    # 3. what rank 0 would save with torch.save(model.state_dict())
    sd = model.state_dict()
    local = sum(v.to_local().numel() for v in sd.values())
    full_sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                                    cpu_offload=True))
    full = sum(v.numel() for v in full_sd.values())  # rank 0: full tensors; others: empty
    kinds = sorted({type(v).__name__ for v in sd.values()})
    if rank == 0:
        torch.save(full_sd, f"{args.ckpt}-full.pt")  # a plain file, loads without FSDP

    # 4. mixed precision: bf16 compute, fp32 gradient reduction and master weights
    seen: dict[str, str] = {}

    def hook(module, inputs):  # the unsharded weight the forward multiplies with
        seen.setdefault("forward_weight", str(module.weight.dtype).replace("torch.", ""))

    mp_model = build_model(args.width, args.layers, seed=0).to(dev)
    mp_model[0].register_forward_pre_hook(hook)
    # region mixed
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    shard(mp_model, mesh, mp_policy=mp)
    # endregion
    mp_opt = torch.optim.Adam(mp_model.parameters(), lr=args.lr)
    mp_losses, mp_error = [], ""
    try:
        x0, y0 = data[0]
        out = mp_model(x0)
        seen["output"] = str(out.dtype).replace("torch.", "")
        nn.functional.cross_entropy(out.float(), y0).backward()
        p = next(mp_model.parameters())
        seen["sharded_param"] = str(p.dtype).replace("torch.", "")
        seen["sharded_grad"] = str(p.grad.dtype).replace("torch.", "")
        mp_opt.zero_grad()
        mp_losses = [step(mp_model, mp_opt, x, y) for x, y in data]
    except RuntimeError as err:     # what gloo does not support shows here
        mp_error = f"{type(err).__name__}: {str(err).splitlines()[0]}"
    del mp_model, mp_opt
    gc.collect()

    # 5. reshard_after_forward: full parameters kept from forward to backward, or freed.
    # Between the two, an unsharded parameter is a plain tensor, a resharded one a DTensor.
    kept = {}
    for flag in (True, False):
        m = shard(build_model(args.width, args.layers, seed=0).to(dev), mesh,
                  reshard_after_forward=flag)
        x, y = data[0]
        loss = nn.functional.cross_entropy(m(x), y)
        kept[str(flag)] = sum(p.numel() * p.element_size() for p in m.parameters()
                              if not isinstance(p, DTensor))
        loss.backward()
        del m, loss
        gc.collect()

    ak.dist.save_json({
        "world_size": world, "device": dev.type, "steps": args.steps, "resume_at": half,
        "losses": losses, "resumed_losses": resumed,
        "state_dict_kinds": kinds, "rank0_state_dict_numel": local, "full_numel": full,
        "mixed": {"seen": seen, "losses": mp_losses, "error": mp_error},
        "unsharded_bytes_after_forward": kept,
        "param_bytes_full": sum(p.numel() * 4 for p in build_model(args.width, args.layers, 0)
                                .parameters()),
    }, args.out)
    ak.dist.print0(f"losses after resume identical: {resumed == losses[half:]}; rank 0's "
                   f"state_dict holds {local:,} of {full:,} elements")


if __name__ == "__main__":
    main()
