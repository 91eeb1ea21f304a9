"""Notebook 01's workers, run for real on 2 CPU ranks: the findings the notebook asserts."""

import pytest

from accelkit import launch, memory, scripts


@pytest.mark.slow
def test_fsdp_worker_peaks_match_the_model_and_the_wrong_order_does_not_train(tmp_path):
    width = 512
    r = launch.torchrun(scripts.worker_script("fsdp_vs_ddp.py"),
                        ["--width", width, "--steps", 3, "--peak", "--order-steps", 3],
                        nproc=2, timeout_s=180, stream=False, env={"CUDA_VISIBLE_DEVICES": ""},
                        out=tmp_path / "fs.json").read_json()
    act = 2 * memory.mlp_activation_bytes(r["local_batch"], [64, width, width, 10])  # 2 ranks
    for kind, strategy, view in (("ddp", "dp", False), ("ddp_bucket_view", "dp", True),
                                 ("fsdp", "zero3", False)):
        want = memory.per_device(r["n_params"], strategy, 2, largest_param=r["largest_param"],
                                 bucket_view=view, activation_bytes=act).total_bytes
        assert r["peak_bytes"][kind] == pytest.approx(want, rel=0.15), kind
    # the bucket view saves the bucket copy of the gradients
    saved = r["peak_bytes"]["ddp"] - r["peak_bytes"]["ddp_bucket_view"]
    assert saved == pytest.approx(r["n_params"] * 4, rel=0.02)
    wrong, right = r["order_wrong"], r["order_right"]
    assert wrong["param_max_abs_change"] == 0.0 and len(set(wrong["losses"])) == 1
    assert right["losses"][-1] < right["losses"][0] and right["param_max_abs_change"] > 0
    assert len(r["ddp_buckets"]["rebuilt_bytes"]) >= 1


@pytest.mark.slow
def test_dp_worker_fits_two_regimes_and_holds_out_sizes(tmp_path):
    r = launch.torchrun(scripts.worker_script("dp_grad.py"),
                        ["--batch", 64, "--width", 256, "--tp-out", tmp_path / "tp.json"],
                        nproc=2, timeout_s=180, stream=False, env={"CUDA_VISIBLE_DEVICES": ""},
                        out=tmp_path / "dp.json").read_json()
    tp = scripts.read_json(tmp_path / "tp.json")  # the same launch ran the tensor-parallel check
    assert max(tp["out_max_abs_err"], tp["grad_max_abs_err"]) <= 1e-5 and tp["world_size"] == 2
    assert r["grad_max_abs_err"] <= 1e-5
    fitted = set(r["sizes_bytes"])
    held = {h["bytes"] for h in r["held_out"]}
    assert r["grad_bytes"] in held and not fitted & held   # the check predicts unseen sizes
    assert r["latency_s"] >= 0 and r["bus_gbps"] > 0
    assert all(h["predicted_s"] > 0 and len(h["times_s"]) == 9 for h in r["held_out"])


@pytest.mark.slow
def test_pipeline_worker_equals_the_unsplit_model_on_this_torch(tmp_path):
    # torch 2.9 (Colab's TPU runtime) aborted in the first step's handshake under gloo and
    # refuses m < p; the worker must still check equality and time every m it may run
    r = launch.torchrun(scripts.worker_script("pipeline_parallel.py"),
                        ["--dim", 64, "--batch", 32, "--microbatches", 2, "--sweep", 1, 2, 4,
                         "--repeats", 1], nproc=2, timeout_s=180, stream=False,
                        env={"CUDA_VISIBLE_DEVICES": ""}, out=tmp_path / "pp.json").read_json()
    assert r["max_abs_err"] <= 1e-5
    ran, refused = [s["m"] for s in r["sweep"]], [s["m"] for s in r["refused"]]
    assert sorted(ran + refused) == [1, 2, 4] and {2, 4} <= set(ran)  # only m < p may be refused
    assert all("microbatches" in s["reason"].lower() for s in r["refused"])
    assert len(r["timeline"]) == 2 and all(s["runs"] for s in r["sweep"])


@pytest.mark.slow
def test_pipeline_worker_runs_1f1b_which_holds_fewer_micro_batches(tmp_path):
    # GPipe keeps every micro-batch's activations until backward, 1F1B at most p - s per stage;
    # both must equal the unsplit model
    m = 4
    r = launch.torchrun(scripts.worker_script("pipeline_parallel.py"),
                        ["--dim", 64, "--batch", 32, "--microbatches", m, "--sweep", m,
                         "--repeats", 2, "--pairs", 2], nproc=2, timeout_s=180, stream=False,
                        env={"CUDA_VISIBLE_DEVICES": ""}, out=tmp_path / "pp.json").read_json()
    s = r["schedules"]
    assert s["gpipe"]["max_abs_err"] <= 1e-5 and s["1f1b"]["max_abs_err"] <= 1e-5
    assert s["gpipe"]["held"] == [m, m] and s["1f1b"]["held"] == [2, 1]
    assert len(s["1f1b"]["span_s"]) == len(s["gpipe"]["span_s"]) == 2
    assert len(s["1f1b"]["timeline"]) == 2


@pytest.mark.slow
def test_no_backend_named_gives_gloo_on_cpu_ranks(tmp_path):
    square = scripts.import_worker("spawn_square.py")
    launch.spawn(square.all_reduce_default_backend, nprocs=2, args=(str(tmp_path), 2, True),
                 timeout_s=60)
    got = sorted((tmp_path / f"backend{r}.json").read_text() for r in (0, 1))
    assert all('"backend_config": "cpu:gloo"' in g and '"sum": 3.0' in g for g in got), got
