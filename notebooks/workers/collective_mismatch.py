"""A mismatched collective, found twice: by the flight recorder, then by DETAIL debug mode.

Run: ``torchrun --standalone --nproc-per-node=2 collective_mismatch.py --out DIR``.

The bug is the commonest one: a collective inside a branch that only rank 0 takes (here a
logging ``all_reduce`` of the loss), so the ranks' sequences of collectives disagree.

1. On a plain group with the flight recorder on (``TORCH_FR_BUFFER_SIZE``, set by the
   launcher) and a short timeout, one step: rank 0 waits in its extra all-reduce until the
   timeout; every rank catches its error (if any) and writes its flight-recorder record
   (each collective it issued: sequence number, op, shapes, state) to ``DIR/rank{rank}.json``.
   (Two steps would pair rank 0's scalar with rank 1's 8 floats: gloo then aborts rank 0,
   SIGABRT, and rank 1 reads "Connection reset by peer".)
2. ``dist.set_debug_level(DebugLevel.DETAIL)`` (what ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` sets
   at start-up) and a new group: each collective is first checked against the other ranks'
   (op, shapes, dtypes); two steps of the same bug now raise at the first collective that
   differs, naming both.
   That error is not caught: the launch fails with it.
"""

import argparse
import pickle
from datetime import timedelta

import torch
import torch.distributed as dist

import accelkit as ak


# region bug
def train(rank: int, group, steps: int) -> None:
    for _ in range(steps):
        grad = torch.ones(8)
        dist.all_reduce(grad, group=group)          # every rank: average the gradients
        loss = torch.tensor(1.0)
        if rank == 0:
            dist.all_reduce(loss, group=group)      # "log the mean loss" -- on rank 0 only
# endregion


def flight_record() -> list[dict]:
    """This process's flight-recorder entries: what each collective was and how far it got."""
    dump = pickle.loads(torch._C._distributed_c10d._dump_fr_trace(includeStackTraces=False))
    keep = ("collective_seq_id", "profiling_name", "input_sizes", "state", "process_group")
    return [{k: e.get(k) for k in keep} for e in dump.get("entries", [])]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout-s", type=float, default=3.0, help="the buggy group's timeout")
    ap.add_argument("--out", required=True, help="folder for each rank's record")
    args = ap.parse_args()
    with ak.dist.session() as info:
        run(args, info)


def run(args: argparse.Namespace, info: ak.dist.RankInfo) -> None:
    # 1. plain group: the error gloo gives, and the flight recorder's view
    plain = dist.new_group(timeout=timedelta(seconds=args.timeout_s))
    try:
        train(info.rank, plain, steps=1)       # rank 0 waits for a partner that never comes
        error = ""
    except RuntimeError as err:
        error = f"{type(err).__name__}: {str(err).strip().splitlines()[0]}"
    ak.dist.save_json({"rank": info.rank, "error": error, "flight_record": flight_record()},
                      f"{args.out}/rank{{rank}}.json", all_ranks=True)
    dist.barrier()                              # the default group still works

    # 2. DETAIL: the same bug, checked before it runs
    # region detail
    dist.set_debug_level(dist.DebugLevel.DETAIL)     # = TORCH_DISTRIBUTED_DEBUG=DETAIL
    checked = dist.new_group(timeout=timedelta(seconds=30))  # wrapped: checks each collective
    train(info.rank, checked, steps=2)         # step 2: rank 0's 2nd collective vs rank 1's
    # endregion


if __name__ == "__main__":
    main()
