"""Notebook 04's FSDP2 checkpoint, run for real on 2 CPU ranks: what each way of saving holds."""

import pytest
import torch
from torch import nn

from accelkit import launch, scripts


@pytest.mark.slow
def test_fsdp_full_state_dict_is_the_single_device_model_and_rank0_shards_are_half(tmp_path):
    width, steps, batch = 64, 3, 128
    r = launch.torchrun(scripts.worker_script("fsdp_vs_ddp.py"),
                        ["--width", width, "--steps", steps, "--batch", batch,
                         "--ckpt", tmp_path / "ckpt"],
                        nproc=2, timeout_s=180, stream=False, env={"CUDA_VISIBLE_DEVICES": ""},
                        out=tmp_path / "fs.json").read_json()
    worker = scripts.import_worker("fsdp_vs_ddp.py")
    ref = worker.build_model(width)                  # one device, the same batches and steps
    opt = torch.optim.Adam(ref.parameters(), lr=1e-3)
    for x, y in worker.global_batches(batch)[:steps]:
        nn.functional.cross_entropy(ref(x), y).backward()
        opt.step()
        opt.zero_grad()
    full = torch.load(tmp_path / "ckpt" / "full.pt")
    plain = worker.build_model(width)
    plain.load_state_dict(full)                      # strict: every key, full shapes
    assert max((full[k] - v).abs().max().item() for k, v in ref.state_dict().items()) <= 1e-5
    ck = r["ckpt"]
    assert ck["full_kinds"] == ["Tensor"] and ck["full_numel"] == r["n_params"]
    assert ck["wrong_kinds"] == ["DTensor"] and ck["wrong_local_numel"] * 2 == ck["full_numel"]
    assert ck["wrong_shapes"]["2.weight"] == [width, width]                 # claims the full shape
    assert ck["wrong_local_shapes"]["2.weight"] == [width // 2, width]      # holds rank 0's half
    wrong = torch.load(tmp_path / "ckpt" / "wrong.pt")
    with pytest.raises(RuntimeError, match="DTensor"):
        worker.build_model(width).load_state_dict(wrong)
