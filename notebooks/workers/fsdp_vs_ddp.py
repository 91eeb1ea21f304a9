"""DDP and FSDP2 (``fully_shard``) train the same model: same losses, less memory per rank.

Run: ``torchrun --standalone --nproc-per-node=2 fsdp_vs_ddp.py --out fsdp.json``.

Both runs start from the same weights and see the same global batches (each rank its
slice).  DDP keeps a full copy of the parameters, gradients and Adam states on every rank
and all-reduces the gradients; FSDP2 keeps only a 1/N shard of each (ZeRO-3, Rajbhandari et
al. 2020), all-gathers a layer's parameters just before it runs and reduce-scatters its
gradients.  The worker records the losses and the bytes each rank holds, measured from the
tensors, next to the memory calculator's prediction.

Then three further measurements (``--peak``): the *peak* bytes of two training steps under
DDP, DDP with ``gradient_as_bucket_view=True`` and FSDP2, each measured from the model's
construction on (CPU: the profiler's memory events; CUDA: ``max_memory_allocated``) next to
``ak.memory.per_device``; and the wrong order — the optimizer built *before*
``fully_shard`` — trained on one fixed batch next to the right order.

With ``--ckpt DIR`` rank 0 also saves the FSDP2 model twice (notebook 04): the DDP habit,
``torch.save(model.state_dict())``, which under FSDP2 writes DTensors holding rank 0's shards
only (``wrong.pt``), and the full state dict that ``get_model_state_dict`` gathers
(``full.pt``, plain tensors that load into the unwrapped model).
"""

import argparse
import gc
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import accelkit as ak


def build_model(width: int) -> nn.Sequential:
    torch.manual_seed(0)  # the same initial weights on every rank and in both runs
    return nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, 10))


def global_batches(batch: int) -> list:
    """The digits in global batches of ``batch``: [(x (B, 64), y (B,)), ...], the tail dropped."""
    d = ak.models.digits()
    x_all = torch.from_numpy(d.x_train.reshape(len(d.x_train), -1))
    y_all = torch.from_numpy(d.y_train)
    return [(x_all[i * batch:(i + 1) * batch], y_all[i * batch:(i + 1) * batch])
            for i in range(len(x_all) // batch)]


def save_checkpoints(model: nn.Module, folder: Path, rank: int) -> dict:
    """Save the FSDP2 model the wrong way and the right way; return what each holds."""
    folder.mkdir(parents=True, exist_ok=True)
    # region save
    sd = model.state_dict()  # wrong under FSDP2: DTensors, each holding this rank's shard
    if rank == 0:
        torch.save(sd, folder / "wrong.pt")
    full = get_model_state_dict(model, options=StateDictOptions(
        full_state_dict=True, cpu_offload=True))  # every rank calls it (it all-gathers)
    if rank == 0:                                  # rank 0 holds plain full tensors, on the CPU
        torch.save(full, folder / "full.pt")
    # endregion
    return {"wrong_kinds": sorted({type(v).__name__ for v in sd.values()}),
            "wrong_shapes": {k: list(v.shape) for k, v in sd.items()},
            "wrong_local_shapes": {k: list(v.to_local().shape) for k, v in sd.items()},
            "wrong_local_numel": sum(v.to_local().numel() for v in sd.values()),
            "full_kinds": sorted({type(v).__name__ for v in full.values()}),
            "full_numel": sum(v.numel() for v in full.values())}


def train(model: nn.Module, batches: list, steps: int, lr: float) -> tuple[list, dict]:
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses, mem = [], {}
    for i in range(steps):
        x, y = batches[i % len(batches)]
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if i == 0:
            mem = ak.memory.measured(model)                 # gradients exist now
        opt.step()
        if i == 0:
            mem["optimizer_bytes"] = ak.memory.measured(model, opt)["optimizer_bytes"]
        opt.zero_grad()
        avg = loss.detach().clone()
        dist.all_reduce(avg)                                # mean of the ranks' losses
        losses.append(avg.item() / dist.get_world_size())
    return losses, mem


def shard(model: nn.Sequential, mesh) -> nn.Sequential:
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)   # each Linear: one all-gather unit
    fully_shard(model, mesh=mesh)           # the root: the rest; onto the mesh's device
    return model


def peak_run(kind: str, width: int, batches: list, device: torch.device, mesh) -> int:
    """Build, wrap and train two steps; return the peak bytes allocated while doing so."""
    def work() -> None:
        model = build_model(width).to(device)
        if kind == "fsdp":
            model = shard(model, mesh)
        else:
            # init_sync=False: the ranks built the same weights (same seed), and the
            # broadcast's buffer is freed on gloo's thread, which the CPU profiler misses
            model = DDP(model, gradient_as_bucket_view=kind == "ddp_bucket_view", init_sync=False)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)  # same temporaries on CPU and GPU
        for x, y in batches[:2]:           # the 2nd step: Adam's states exist all step long
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    _, peak = ak.memory.measured_peak_bytes(work, device)
    dist.barrier()     # a new collective releases the last one's buffers (gloo keeps them)
    gc.collect()
    return peak


# region order
def order_run(order: str, width: int, x, y, mesh, steps: int) -> tuple[list, float]:
    model = build_model(width).to(x.device)
    before = [p.detach().clone() for p in model.parameters()]
    if order == "wrong":
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)   # holds the plain tensors...
    shard(model, mesh)                                         # ...which fully_shard replaces
    if order == "right":
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)   # holds the DTensor shards
    losses = []
    for _ in range(steps):                                     # one fixed batch: loss must fall
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    moved = max((p.full_tensor() - b).abs().max().item()
                for p, b in zip(model.parameters(), before))
    return losses, moved
# endregion


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=128, help="global batch size")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--peak", action="store_true", help="also measure peak memory and the order")
    ap.add_argument("--order-steps", type=int, default=5)
    ap.add_argument("--ckpt", help="folder: save the FSDP2 model the wrong and the right way")
    ap.add_argument("--out", required=True)
    return ap.parse_args(argv)  # argv: None = the command line


def main() -> None:
    args = parse_args()
    with ak.dist.session() as info:  # the group is torn down even when run() raises
        run(args, info)


def run(args: argparse.Namespace, info: ak.dist.RankInfo) -> None:
    rank, world = info.rank, info.world_size
    batches = [(x.chunk(world)[rank].to(info.device), y.chunk(world)[rank].to(info.device))
               for x, y in global_batches(args.batch)]     # each (B/N, 64) and (B/N,)

    ddp = DDP(build_model(args.width).to(info.device))
    ddp_losses, ddp_mem = train(ddp, batches, args.steps, args.lr)
    log = ddp._get_ddp_logging_data()  # DDP's own record of its buckets

    def ints(key: str) -> list:
        return [int(v) for v in str(log.get(key, "")).replace(",", " ").split()]

    buckets = {"initial_bytes": ints("bucket_sizes"), "cap_bytes": log.get("bucket_cap_bytes"),
               "rebuilt_bytes": ints("rebuilt_bucket_sizes"),      # after the first step
               "rebuilt_params": [[int(i) for i in b.split()] for b in
                                  str(log.get("rebuilt_per_bucket_param_indices", "")).split(",")
                                  if b.strip()]}

    # region fsdp
    mesh = init_device_mesh(info.device.type, (world,))
    model = build_model(args.width)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)   # each Linear: one all-gather unit
    fully_shard(model, mesh=mesh)           # the root: the rest; onto the mesh's device
    # endregion
    fsdp_losses, fsdp_mem = train(model, batches, args.steps, args.lr)

    n_params = sum(p.numel() for p in build_model(args.width).parameters())
    final = max((a.full_tensor() - b).abs().max().item()
                for a, b in zip(model.parameters(), ddp.module.parameters()))
    shapes = {n: list(p.to_local().shape) for n, p in model.named_parameters()}
    extra = {}
    if args.ckpt:
        extra["ckpt"] = save_checkpoints(model, Path(args.ckpt), rank)
    if args.peak:
        del ddp, model
        dist.barrier()
        gc.collect()
        # each run 3 times: on the CPU a tensor freed on gloo's thread is missed by the
        # profiler, which can only make a peak look higher, so the smallest is the estimate
        runs = {k: [peak_run(k, args.width, batches, info.device, mesh) for _ in range(3)]
                for k in ("ddp", "ddp_bucket_view", "fsdp")}
        extra["peak_bytes"] = {k: min(v) for k, v in runs.items()}
        extra["peak_bytes_runs"] = runs
        extra["local_batch"] = len(batches[0][1])
        extra["largest_param"] = max(p.numel() for p in build_model(args.width).parameters())
        for order in ("wrong", "right"):
            losses, moved = order_run(order, args.width, *batches[0], mesh, args.order_steps)
            extra[f"order_{order}"] = {"losses": losses, "param_max_abs_change": moved}
    ak.dist.save_json({
        **extra, "device": info.device.type, "ddp_buckets": buckets,
        "world_size": world, "n_params": n_params, "steps": args.steps,
        "ddp_losses": ddp_losses, "fsdp_losses": fsdp_losses,
        "loss_max_abs_diff": max(abs(a - b) for a, b in zip(ddp_losses, fsdp_losses)),
        "param_max_abs_diff": final, "ddp_bytes": ddp_mem, "fsdp_bytes": fsdp_mem,
        "fsdp_local_shapes": shapes,
    }, args.out)
    ak.dist.print0(f"parameter bytes per rank: DDP {ddp_mem['params_bytes']:,}, "
                   f"FSDP2 {fsdp_mem['params_bytes']:,}; loss difference "
                   f"{max(abs(a - b) for a, b in zip(ddp_losses, fsdp_losses)):.2e}")


if __name__ == "__main__":
    main()
