"""accelkit.dist: rank info, backend choice, session and error files; real 2-rank gloo groups
(slow) at the end, which also
time collectives there.  Collective timing alone and the cost model are tested in test_comm.py."""

import json
import os
import sys
import textwrap

import pytest
import torch

from accelkit import dist, launch


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


def test_session_tears_down_and_re_raises_without_torchrun(no_launcher, monkeypatch):
    calls = []
    monkeypatch.setattr(dist, "teardown", lambda barrier=True: calls.append(barrier))
    with pytest.raises(ValueError, match="boom"), dist.session():
        raise ValueError("boom")
    assert calls == [False]  # no barrier while an exception is in flight
    with dist.session():
        pass
    assert calls == [False, True]


def test_session_records_the_exception_in_torchruns_error_file(no_launcher, tmp_path,
                                                                monkeypatch):
    err = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(err))
    with pytest.raises(ValueError, match="boom"), dist.session():
        raise ValueError("boom")
    msg = json.loads(err.read_text())["message"]
    assert msg["message"] == "ValueError: boom"
    assert "raise ValueError" in msg["extraInfo"]["py_callstack"]
    err.unlink()
    with pytest.raises(KeyboardInterrupt), dist.session():  # like torch's @record: not recorded
        raise KeyboardInterrupt
    assert not err.exists()
    with pytest.raises(ValueError, match="timeout_s"), dist.session(timeout_s=0):
        pass  # a failing setup is recorded too
    assert "timeout_s" in json.loads(err.read_text())["message"]["message"]


@pytest.mark.slow
def test_a_real_gloo_group(tmp_path, monkeypatch):
    """Two ranks under torchrun: session, replica check, timing, measure -> fit -> predict."""
    monkeypatch.setenv("ACCELKIT_SCRATCH", str(tmp_path / "scratch"))
    out = tmp_path / "r.json"
    script = tmp_path / "w.py"
    script.write_text(textwrap.dedent(f"""\
        import torch, torch.distributed as td
        import accelkit as ak
        with ak.dist.session() as info:
            torch.manual_seed(0)  # the same bias on every rank: only the weights differ
            lin = torch.nn.Linear(3, 2)
            torch.nn.init.constant_(lin.weight, float(info.rank))  # replicas differ by 1
            diff = ak.dist.replica_max_abs_diff(lin)
            t = ak.comm.measure_allreduce([4, 4096], repeats=2, max_number=3)
            check = ak.comm.allreduce_vs_model(1 << 20, sizes_bytes=[4096, 1 << 22])
            ak.dist.save_json({{"rank": info.rank, "world": info.world_size,
                               "backend": info.backend, "diff": diff,
                               "n_times": [len(v.times_s) for v in t.values()],
                               "check": check}}, r"{out}")
        assert not td.is_initialized()
        """))
    launch.torchrun(script, nproc=2, timeout_s=90, stream=False,
                    env={"CUDA_VISIBLE_DEVICES": ""})  # gloo on the CPU even on a 1-GPU box
    res = json.loads(out.read_text())
    check = res.pop("check")
    assert res == {"rank": 0, "world": 2, "backend": "gloo", "diff": 1.0, "n_times": [2, 2]}
    assert check["sizes_bytes"] == [4096, 1 << 22] and check["bus_gbps"] > 0
    assert check["allreduce_predicted_s"] > 0 and len(check["allreduce_times_s"]) == 9


def test_collective_timeout_comes_from_the_launcher_or_the_default(monkeypatch):
    monkeypatch.delenv(dist.TIMEOUT_ENV, raising=False)
    assert dist.collective_timeout_s() == dist.DEFAULT_TIMEOUT_S
    monkeypatch.setenv(dist.TIMEOUT_ENV, "7.5")
    assert dist.collective_timeout_s() == 7.5
    for bad in ("0", "soon"):
        monkeypatch.setenv(dist.TIMEOUT_ENV, bad)
        with pytest.raises(ValueError, match=dist.TIMEOUT_ENV):
            dist.collective_timeout_s()


@pytest.mark.skipif(dist.STACK_SIGNAL is None, reason="no SIGUSR1 here")
def test_enable_stack_dumps_registers_the_signal():
    import faulthandler

    from accelkit import procs

    try:
        assert dist.enable_stack_dumps()
        if sys.platform.startswith("linux"):
            assert procs.catches_signal(os.getpid(), dist.STACK_SIGNAL)
    finally:
        faulthandler.unregister(dist.STACK_SIGNAL)
