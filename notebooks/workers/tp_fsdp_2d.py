"""2-D parallelism: tensor parallel inside a node, FSDP2 across, on a 2 x 2 DeviceMesh.

Run: ``torchrun --standalone --nproc-per-node=4 tp_fsdp_2d.py --out r.json``.

The mesh has two named dimensions, ``dp`` (data parallel, FSDP2 shards over it) and ``tp``
(tensor parallel).  A pre-norm transformer block is split Megatron-style over ``tp``
(q, k, v and the MLP's first Linear by output columns, the attention's output projection and
the MLP's second Linear by input rows: each rank holds ``n_head / tp`` heads), then
``fully_shard`` shards every parameter over ``dp``.  The two ``dp`` groups see different
halves of the global batch; the two ranks of a ``tp`` group see the same half.

Every rank also trains the unsplit block on the whole global batch, in one process: the
losses and the weights after each SGD step must be equal (fp32, up to the order of sums).
"""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import accelkit as ak


class Block(nn.Module):
    """Pre-norm transformer block with separate q, k, v (so heads split cleanly over ranks).

    **Shape** ``x: (B, T, C)`` -> ``(B, T, C)``.  Under tensor parallelism ``q(x)`` returns
    this rank's ``C / tp`` columns, so the head count is read from the tensor (``-1``).
    """

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.head_dim = dim // heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.k, self.v = (nn.Linear(dim, dim) for _ in range(3))
        self.proj = nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        h = self.ln1(x)
        q, k, v = (f(h).view(B, T, -1, self.head_dim).transpose(1, 2)    # (B, H_local, T, D)
                   for f in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, -1))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


# region plan
TP_PLAN = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
           "proj": RowwiseParallel(), "up": ColwiseParallel(), "down": RowwiseParallel()}


def parallelize(block: nn.Module, mesh) -> nn.Module:
    parallelize_module(block, mesh["tp"], TP_PLAN)   # split inside each tp pair
    fully_shard(block, mesh=mesh["dp"])              # then shard over the dp dimension
    return block
# endregion


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8, help="global batch size")
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--dp", type=int, default=2, help="size of the dp dimension")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with ak.dist.session() as info:
        run(args, info)


def run(args: argparse.Namespace, info: ak.dist.RankInfo) -> None:
    if info.world_size % args.dp:
        raise ValueError(f"world size {info.world_size} is not divisible by --dp {args.dp}")
    tp = info.world_size // args.dp
    # region mesh
    mesh = init_device_mesh(info.device.type, (args.dp, tp), mesh_dim_names=("dp", "tp"))
    # endregion
    torch.manual_seed(0)                                   # same weights and data everywhere
    ref = Block(args.dim, args.heads).to(info.device)
    model = parallelize(copy.deepcopy(ref), mesh)
    x = torch.randn(args.batch, args.seq, args.dim, device=info.device)      # (B, T, C)
    target = torch.randn_like(x)
    dp_rank = mesh["dp"].get_local_rank()
    x_local, t_local = x.chunk(args.dp)[dp_rank], target.chunk(args.dp)[dp_rank]

    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=args.lr)
    loss_err, param_err, losses = [], [], []
    for _ in range(args.steps):
        loss = F.mse_loss(model(x_local), t_local)         # this dp group's half
        loss.backward()                                    # FSDP averages over dp
        opt.step()
        opt.zero_grad()
        loss_ref = F.mse_loss(ref(x), target)              # one device, whole batch
        loss_ref.backward()
        opt_ref.step()
        opt_ref.zero_grad()
        avg = loss.detach().clone()
        torch.distributed.all_reduce(avg, group=mesh["dp"].get_group())
        losses.append([avg.item() / args.dp, loss_ref.item()])
        loss_err.append(abs(avg.item() / args.dp - loss_ref.item()))
        param_err.append(max((p.full_tensor() - q).abs().max().item()
                             for p, q in zip(model.parameters(), ref.parameters())))
    placements = {n: str(p.placements) for n, p in model.named_parameters()}
    local = {n: list(p.to_local().shape) for n, p in model.named_parameters()}
    ak.dist.save_json({
        "world_size": info.world_size, "mesh": [args.dp, tp], "losses": losses,
        "loss_max_abs_err": max(loss_err), "param_max_abs_err": max(param_err),
        "placements": placements, "local_shapes": local,
        "full_shapes": {n: list(p.shape) for n, p in ref.named_parameters()},
    }, args.out)
    ak.dist.print0(f"2-D ({args.dp} x {tp}) vs one device: loss error {max(loss_err):.1e}, "
                   f"weight error {max(param_err):.1e}")


if __name__ == "__main__":
    main()
