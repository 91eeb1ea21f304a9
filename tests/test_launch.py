"""accelkit.launch: real torchrun/TF/spawn groups that end cleanly, fail loudly, never linger."""

import os
import socket
import subprocess
import sys
import textwrap
import time
import types

import pytest

from accelkit import launch

# Each launch must end at most this long after its own time limit (the bar).
SLACK_S = 10


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def _no_leftovers(result_or_id):
    launch_id = getattr(result_or_id, "launch_id", result_or_id)
    assert launch_id
    deadline = time.perf_counter() + 3
    while launch.leftover_processes(launch_id) and time.perf_counter() < deadline:
        time.sleep(0.1)
    assert launch.leftover_processes(launch_id) == []


@pytest.fixture
def ok_worker(tmp_path):
    return _script(tmp_path, "ok.py", """\
        import torch.distributed as dist
        dist.init_process_group("gloo")
        print(f"hello from rank {dist.get_rank()} of {dist.get_world_size()}")
        dist.barrier()
        dist.destroy_process_group()
        """)


def test_clean_run_streams_each_rank_with_a_prefix(ok_worker, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELKIT_SCRATCH", str(tmp_path / "scratch"))
    t0 = time.perf_counter()
    res = launch.torchrun(ok_worker, nproc=2, timeout_s=60)
    assert time.perf_counter() - t0 < 60 + SLACK_S
    assert res.ok and res.exit_codes == {0: 0, 1: 0} and not res.timed_out
    assert "hello from rank 0 of 2" in res.logs[0] and "hello from rank 1 of 2" in res.logs[1]
    out = capsys.readouterr().out
    assert "[rank0]: hello from rank 0 of 2" in out and "[rank1]: hello from rank 1 of 2" in out
    assert "--standalone" in res.command and "--nproc-per-node=2" in res.command
    assert res.summary().startswith("ok:")
    _no_leftovers(res)


def test_failing_worker_stops_the_others_and_its_traceback_comes_first(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELKIT_SCRATCH", str(tmp_path / "scratch"))
    script = _script(tmp_path, "fail.py", """\
        import time
        import torch.distributed as dist
        dist.init_process_group("gloo")
        if dist.get_rank() == 1:
            raise ValueError("boom on rank one")
        time.sleep(600)   # rank 0 would wait forever: torchrun must stop it
        """)
    t0 = time.perf_counter()
    with pytest.raises(launch.LaunchError) as info:
        launch.torchrun(script, nproc=2, timeout_s=60, stream=False)
    assert time.perf_counter() - t0 < 60 + SLACK_S
    msg = str(info.value)
    first = msg.splitlines()[0]
    assert first.startswith("rank 1 failed first (exit code 1)")
    assert msg.index("ValueError: boom on rank one") < msg.index("other ranks")
    assert "rank 0 was stopped by SIGTERM" in msg
    res = info.value.result
    assert res.failed_rank == 1 and res.exit_codes[1] == 1 and not res.timed_out
    _no_leftovers(res)


def test_hanging_worker_is_killed_with_its_children_at_the_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELKIT_SCRATCH", str(tmp_path / "scratch"))
    # The worker also starts a grandchild in its own session: it must die too.
    script = _script(tmp_path, "hang.py", """\
        import subprocess, sys, time
        import torch.distributed as dist
        dist.init_process_group("gloo")
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                         start_new_session=True)
        print("hanging", flush=True)
        time.sleep(600)
        """)
    timeout = 8
    t0 = time.perf_counter()
    res = launch.torchrun(script, nproc=2, timeout_s=timeout, check=False, stream=False)
    took = time.perf_counter() - t0
    assert res.timed_out and not res.ok
    assert timeout <= took < timeout + SLACK_S
    assert res.summary().startswith("TIMEOUT: the run passed its time limit of 8 s")
    assert res.killed >= 3  # torchrun + 2 workers (+ grandchildren)
    with pytest.raises(launch.LaunchError, match="TIMEOUT"):
        res.check()
    _no_leftovers(res)


def test_busy_ports_and_a_lingering_group_do_not_block_a_new_run(ok_worker, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setenv("ACCELKIT_SCRATCH", str(tmp_path / "scratch"))
    hang = _script(tmp_path, "linger.py", """\
        import time
        import torch.distributed as dist
        dist.init_process_group("gloo")
        time.sleep(600)
        """)
    lingering_id = "lingering-test"
    env = dict(os.environ, **{launch.MARKER_ENV: lingering_id})
    old = subprocess.Popen(launch.torchrun_command(hang, nproc_per_node=2), env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    socks = []
    try:
        for port in (29500, 29400):  # torchrun's and c10d's usual default ports
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
                s.listen()
                socks.append(s)
            except OSError:
                s.close()  # already busy: even better
        busy = socks[0].getsockname()[1] if socks else 29500
        t0 = time.perf_counter()
        with pytest.raises(launch.PortInUseError, match="pass port=None"):
            launch.torchrun(ok_worker, nproc=2, nnodes=2, port=busy, timeout_s=30)
        assert time.perf_counter() - t0 < 1.0  # refused before starting anything
        res = launch.torchrun(ok_worker, nproc=2, timeout_s=60, stream=False)
        assert res.ok and old.poll() is None  # the old group still runs, the new one passed
    finally:
        for s in socks:
            s.close()
        launch._kill_all([launch._ps(old.pid)], lingering_id, grace_s=2)
        old.wait(timeout=10)
    _no_leftovers(lingering_id)
    _no_leftovers(res)


def test_two_nodes_on_loopback_run_the_multi_node_command(ok_worker, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELKIT_SCRATCH", str(tmp_path / "scratch"))
    res = launch.torchrun(ok_worker, nproc=1, nnodes=2, timeout_s=90, stream=False)
    assert res.ok and res.exit_codes == {0: 0, 1: 0}
    assert len(res.commands) == 2 and res.commands[0] == res.commands[1]
    for flag in ("--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:"):
        assert flag in res.command
    assert "hello from rank 1 of 2" in res.logs[1]
    _no_leftovers(res)


def test_plain_python_and_tf_style_workers_fail_fast(tmp_path):
    ok = _script(tmp_path, "one.py", "import os\nprint('cfg', os.environ.get('TF_CONFIG'))\n")
    res = launch.python(ok, timeout_s=30, stream=False)
    assert res.ok and res.logs[0].startswith("cfg None")
    bad = _script(tmp_path, "two.py", """\
        import json, os, sys, time
        idx = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
        print("worker", idx, flush=True)
        if idx == 1:
            sys.exit("worker one gives up")
        time.sleep(600)
        """)
    t0 = time.perf_counter()
    res = launch.tf_workers(bad, n=2, timeout_s=60, check=False, stream=False)
    assert time.perf_counter() - t0 < 15  # worker 0 was stopped, not waited for
    assert res.failed_rank == 1 and res.exit_codes == {0: -15, 1: 1}
    assert res.summary().splitlines()[0] == "rank 1 failed first (exit code 1); its own output:"
    assert "worker one gives up" in res.summary()


def test_spawn_shows_the_childs_real_error_for_an_unimportable_function(tmp_path, monkeypatch):
    # A function whose module exists only in this process, like a notebook's __main__.
    fake = types.ModuleType("accelkit_fake_notebook")
    exec("def work(rank):\n    print('hi', rank)\n", fake.__dict__)
    monkeypatch.setitem(sys.modules, "accelkit_fake_notebook", fake)
    with pytest.raises(launch.LaunchError) as info:
        launch.spawn(fake.work, nprocs=2, timeout_s=60)
    msg = str(info.value)
    assert "ProcessExitedException" in msg and "No module named 'accelkit_fake_notebook'" in msg
    # The fix: the worker function lives in a file the children can import.
    _script(tmp_path, "spawn_ok_mod.py", "def work(rank, out):\n"
            "    open(f'{out}/{rank}.txt', 'w').write(str(rank))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import spawn_ok_mod

    launch.spawn(spawn_ok_mod.work, nprocs=2, args=(str(tmp_path),), timeout_s=60)
    assert sorted(p.name for p in tmp_path.glob("[01].txt")) == ["0.txt", "1.txt"]


def test_spawn_timeout_kills_the_children(tmp_path, monkeypatch):
    _script(tmp_path, "spawn_hang_mod.py", "import time\ndef work(rank):\n    time.sleep(600)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import spawn_hang_mod

    t0 = time.perf_counter()
    with pytest.raises(TimeoutError, match="killed"):
        launch.spawn(spawn_hang_mod.work, nprocs=2, timeout_s=5)
    assert time.perf_counter() - t0 < 5 + SLACK_S


# ----------------------------------------------------------------------------- pure helpers
def test_commands_and_tf_config():
    single = launch.torchrun_command("w.py", ["--x", 1], nproc_per_node=4)
    assert single[1:] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
                          "w.py", "--x", "1"]
    multi = launch.torchrun_command("w.py", nproc_per_node=8, nnodes=2,
                                    rdzv_endpoint="node0:29400", rdzv_id="job")
    assert "--nnodes=2" in multi and "--rdzv-endpoint=node0:29400" in multi
    with pytest.raises(ValueError, match="rdzv_endpoint"):
        launch.torchrun_command("w.py", nnodes=2)
    with pytest.raises(ValueError, match="nproc_per_node"):
        launch.torchrun_command("w.py", nproc_per_node=0)
    cfg = launch.tf_config(2, 1, [1111, 2222])
    assert '"worker": ["localhost:1111", "localhost:2222"]' in cfg
    assert '"index": 1' in cfg
    with pytest.raises(ValueError):
        launch.tf_config(2, 2, [1, 2])


def test_ports_and_validation(tmp_path, ok_worker):
    port = launch.free_port()
    assert launch.is_port_free(port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert not launch.is_port_free(port)
    with pytest.raises(ValueError):
        launch.is_port_free(0)
    with pytest.raises(FileNotFoundError):
        launch.torchrun(tmp_path / "missing.py")
    with pytest.raises(ValueError, match="timeout_s"):
        launch.torchrun(ok_worker, timeout_s=0)
    with pytest.raises(ValueError, match="threads"):
        launch.torchrun(ok_worker, threads=0)


def test_parse_torchrun_failure_report():
    text = """Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 4713)  (SIGTERM)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 4714)
"""
    codes, root = launch._parse_torchrun_failures(text)
    assert codes == {0: -15, 1: 1} and root == 1


def test_script_regions_and_diff(tmp_path):
    a = _script(tmp_path, "a.py", "x = 1\n# region core\ny = 2\n# endregion\n")
    b = _script(tmp_path, "b.py", "x = 1\n# region core\ny = 3\n# endregion\n")
    assert launch.script_source(a, "core") == "y = 2"
    with pytest.raises(ValueError, match="region nope"):
        launch.script_source(a, "nope")
    diff = launch.script_diff(a, b)
    assert "-y = 2" in diff and "+y = 3" in diff
    with pytest.raises(FileNotFoundError, match="did not write"):
        launch.read_json(tmp_path / "none.json")
    assert launch.worker_script("dp_grad.py").name == "dp_grad.py"


def test_worker_plan_fresh_path_and_show(tmp_path, capsys, monkeypatch):
    plan = launch.worker_plan()
    assert plan.nproc >= 2 and plan.device in ("cpu", "cuda") and plan.reason
    if plan.device == "cpu":
        assert plan.env == {"CUDA_VISIBLE_DEVICES": ""}
    assert launch.worker_plan(3).nproc == 3
    with pytest.raises(ValueError):
        launch.worker_plan(0)
    stale = tmp_path / "a" / "r.json"
    stale.parent.mkdir()
    stale.write_text("{}")
    assert launch.fresh_path(stale) == stale and not stale.exists()
    folder = tmp_path / "dir"
    (folder / "x").mkdir(parents=True)
    assert not launch.fresh_path(folder).exists()
    monkeypatch.setitem(sys.modules, "IPython", None)  # no IPython: plain print
    monkeypatch.setitem(sys.modules, "IPython.display", None)  # even if imported earlier
    launch.show(launch.worker_script("spawn_square.py"))
    assert "def square" in capsys.readouterr().out
