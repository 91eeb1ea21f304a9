"""accelkit.dist: rank info, backend choice, cost model; a real 2-rank gloo group at the end."""

import json
import textwrap

import pytest
import torch

from accelkit import dist, launch


@pytest.fixture
def no_launcher(monkeypatch):
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
        monkeypatch.delenv(k, raising=False)


def test_single_process_is_rank_zero_of_one(no_launcher):
    info = dist.setup()
    assert (info.rank, info.world_size, info.launched, info.is_main) == (0, 1, False, True)
    assert dist.get_rank() == 0 and dist.get_world_size() == 1 and dist.is_main()
    assert not torch.distributed.is_initialized()  # nothing to initialise alone
    dist.teardown()  # safe without a group
    with dist.session() as again:
        assert again.world_size == 1


def test_rank_info_reads_the_launchers_environment(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("GROUP_RANK", "1")
    info = dist.rank_info()
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size,
            info.node_rank, info.launched, info.is_main) == (3, 1, 4, 2, 1, True, False)
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match="RANK=4"):
        dist.rank_info()
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="not an integer"):
        dist.rank_info()


def test_backend_is_gloo_on_cpu_and_nccl_refused_there(no_launcher):
    assert dist.choose_backend("cpu") == "gloo"
    if not torch.cuda.is_available():
        assert dist.choose_backend() == "gloo"
        with pytest.raises(ValueError, match="nccl"):
            dist.setup("nccl")
    with pytest.raises(ValueError, match="timeout_s"):
        dist.setup(timeout_s=0)


def test_print0_and_save_json(no_launcher, tmp_path, capsys, monkeypatch):
    dist.print0("hello", 1)
    assert capsys.readouterr().out == "hello 1\n"
    dist.save_json({"a": 1}, tmp_path / "sub" / "r.json")
    assert json.loads((tmp_path / "sub" / "r.json").read_text()) == {"a": 1}
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    dist.print0("not me")
    assert capsys.readouterr().out == ""
    dist.save_json({"b": 2}, tmp_path / "other.json")  # rank 1 writes nothing
    assert not (tmp_path / "other.json").exists()
    with pytest.raises(ValueError, match="rank"):
        dist.save_json({}, tmp_path / "x.json", all_ranks=True)
    dist.save_json({"r": 1}, tmp_path / "x{rank}.json", all_ranks=True)
    assert (tmp_path / "x1.json").exists()


def test_ring_cost_model_and_fit():
    # 2 ranks move 2*(1/2)*S = S bytes each; 1 GB at 1 GB/s = 1 s (+ latency).
    assert dist.ring_allreduce_s(1e9, 2, 1.0) == pytest.approx(1.0)
    assert dist.ring_allreduce_s(1e9, 4, 1.0, latency_s=0.5) == pytest.approx(0.5 + 1.5)
    assert dist.ring_allreduce_s(1e9, 1, 1.0) == 0.0
    assert dist.bus_bandwidth_gbps(1e9, 2, 1.0) == pytest.approx(1.0)
    sizes = [1e3, 1e5, 1e6, 1e7]
    times = [dist.ring_allreduce_s(s, 2, 2.5, 1e-4) for s in sizes]
    lat, bw = dist.fit_allreduce(sizes, times, 2)
    assert lat == pytest.approx(1e-4) and bw == pytest.approx(2.5)
    with pytest.raises(ValueError):
        dist.ring_allreduce_s(1, 2, 0)
    with pytest.raises(ValueError):
        dist.bus_bandwidth_gbps(1, 1, 1)
    with pytest.raises(ValueError, match="grow"):
        dist.fit_allreduce([1, 2], [2.0, 1.0], 2)
    with pytest.raises(ValueError):
        dist.fit_allreduce([1], [1.0], 2)


def test_time_collective_alone_and_its_arguments(no_launcher):
    t = dist.time_collective(lambda: torch.ones(4).sum(), number=3, repeats=2, warmup=0)
    assert len(t.times_s) == 2 and t.median_s > 0
    with pytest.raises(ValueError):
        dist.time_collective(lambda: None, number=0)
    with pytest.raises(RuntimeError, match="process group"):
        dist.measure_allreduce([4])


def test_a_real_gloo_group(tmp_path, monkeypatch):
    """Two ranks under torchrun: setup, replica check, timing, all-reduce fit."""
    monkeypatch.setenv("ACCELKIT_SCRATCH", str(tmp_path / "scratch"))
    out = tmp_path / "r.json"
    script = tmp_path / "w.py"
    script.write_text(textwrap.dedent(f"""\
        import torch, torch.distributed as td
        import accelkit as ak
        info = ak.dist.setup()
        torch.manual_seed(0)  # the same bias on every rank: only the weights differ
        lin = torch.nn.Linear(3, 2)
        torch.nn.init.constant_(lin.weight, float(info.rank))  # replicas differ by 1
        diff = ak.dist.replica_max_abs_diff(lin)
        t = ak.dist.measure_allreduce([4, 4096], repeats=2, max_number=3)
        ak.dist.save_json({{"rank": info.rank, "world": info.world_size,
                           "backend": info.backend, "diff": diff,
                           "n_times": [len(v.times_s) for v in t.values()]}}, r"{out}")
        ak.dist.teardown()
        """))
    launch.torchrun(script, nproc=2, timeout_s=90, stream=False,
                    env={"CUDA_VISIBLE_DEVICES": ""})  # gloo on the CPU even on a 1-GPU box
    res = json.loads(out.read_text())
    assert res == {"rank": 0, "world": 2, "backend": "gloo", "diff": 1.0, "n_times": [2, 2]}
