"""Notebook 07's workers, run for real on CPU ranks over gloo: the findings the notebook asserts."""

import json

import pytest
import torch

from accelkit import jobs, launch, scripts

CPU = {"CUDA_VISIBLE_DEVICES": ""}


@pytest.mark.slow
def test_fsdp_checkpoint_resumes_identically_on_two_ranks_and_on_one(tmp_path):
    ckpt = tmp_path / "dcp"
    r = launch.torchrun(scripts.worker_script("fsdp_checkpoint.py"),
                        ["--steps", 4, "--width", 64, "--layers", 2, "--ckpt", ckpt], nproc=2,
                        timeout_s=240, stream=False, env=CPU, out=tmp_path / "r.json").read_json()
    half = r["resume_at"]
    assert half == 2 and r["resumed_losses"] == r["losses"][half:]
    assert r["rank0_state_dict_numel"] * 2 == r["full_numel"]
    assert r["state_dict_kinds"] == ["DTensor"]
    seen = r["mixed"]["seen"]
    assert r["mixed"]["error"] or (seen["forward_weight"] == "bfloat16"
                                   and seen["sharded_param"] == seen["sharded_grad"] == "float32")
    kept = r["unsharded_bytes_after_forward"]          # between forward and backward
    assert kept["True"] == 0 and kept["False"] == r["param_bytes_full"]
    # the 2-rank checkpoint loads into one plain process (no process group) and continues
    fc = scripts.import_worker("fsdp_checkpoint.py")
    model = fc.build_model(64, 2, seed=5)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    fc.load(model, opt, ckpt)
    losses = []
    for x, y in fc.batches(4, 64, rank=0, world=1)[half:]:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert max(abs(a - b) for a, b in zip(losses, r["losses"][half:])) <= 1e-5
    # a fresh model without the load differs: the comparison above can fail
    other = fc.build_model(64, 2, seed=5)
    x, y = fc.batches(4, 64, rank=0, world=1)[half]
    assert abs(torch.nn.functional.cross_entropy(other(x), y).item() - losses[0]) > 1e-3
    full = torch.load(f"{ckpt}-full.pt")
    fc.build_model(64, 2, seed=6).load_state_dict(full)        # strict: full tensors


@pytest.mark.slow
def test_2d_mesh_trains_like_one_device(tmp_path):
    r = launch.torchrun(scripts.worker_script("tp_fsdp_2d.py"), ["--steps", 2], nproc=4,
                        timeout_s=240, stream=False, env=CPU, out=tmp_path / "r.json").read_json()
    assert r["mesh"] == [2, 2]
    assert r["loss_max_abs_err"] <= 1e-5 and r["param_max_abs_err"] <= 1e-5
    assert r["local_shapes"]["q.weight"] == [16, 64] and r["full_shapes"]["q.weight"] == [64, 64]
    assert "Shard(dim=1)" in r["placements"]["proj.weight"]   # row-parallel: split by inputs


@pytest.mark.slow
def test_mismatched_collective_is_caught_by_detail_and_seen_by_the_flight_recorder(tmp_path):
    r = launch.torchrun(scripts.worker_script("collective_mismatch.py"), ["--timeout-s", 2],
                        nproc=2, timeout_s=120, stream=False, check=False,
                        env={**CPU, "TORCH_FR_BUFFER_SIZE": "64"}, out=tmp_path / "mm")
    assert not r.ok and not r.timed_out
    assert "Detected mismatch between collectives" in r.summary()
    recs = {k: json.loads((tmp_path / "mm" / f"rank{k}.json").read_text()) for k in (0, 1)}
    assert "Timed out" in recs[0]["error"] and recs[1]["error"] == ""
    rows = jobs.collective_rows({k: v["flight_record"] for k, v in recs.items()})
    assert jobs.first_divergence(rows) == 2 and rows[-1][1] == "—"


def test_loader_data_reads_slowly_and_validates():
    ld = scripts.import_worker("loader_data.py")
    ds = ld.SlowReads(10, dim=3, read_ms=0)
    x, y = ds[0]
    assert len(ds) == 10 and x.shape == (3,) and 0 <= int(y) < 10
    assert [float(ld.Squares()[i][1]) for i in range(4)] == [0.0, 1.0, 4.0, 9.0]
    for bad in ({"n": 0}, {"n": 4, "read_ms": -1}, {"n": 4, "classes": 1}):
        with pytest.raises(ValueError):
            ld.SlowReads(**bad)
