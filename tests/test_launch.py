"""accelkit.launch: real torchrun/TF/spawn groups that end cleanly, fail loudly, never linger."""

import json
import os
import subprocess
import sys
import textwrap
import time
import types

import pytest
from torch.distributed.elastic.multiprocessing.api import SubprocessContext

from accelkit import launch, procs, scripts

# Each launch must end at most this long after its own time limit (the bar).
SLACK_S = 10

# Whether torchrun's agent records the exit codes of the workers it stopped after the first
# failure (pytorch/pytorch#160908: torch 2.13 does; torch 2.9, Colab's TPU runtime, records
# only the failed worker).  Read from the agent's code: the method that PR added.
RECORDS_STOPPED = hasattr(SubprocessContext, "_capture_process_failures")


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def _no_leftovers(result_or_id):
    launch_id = getattr(result_or_id, "launch_id", result_or_id)
    assert launch_id
    deadline = time.perf_counter() + 3
    while procs.leftover_processes(launch_id) and time.perf_counter() < deadline:
        time.sleep(0.1)
    assert procs.leftover_processes(launch_id) == []


@pytest.fixture(autouse=True)
def _scratch(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELKIT_SCRATCH", str(tmp_path / "scratch"))


@pytest.fixture
def ok_worker(tmp_path):
    return _script(tmp_path, "ok.py", """\
        import sys
        import torch.distributed as dist
        dist.init_process_group("gloo")
        print(f"hello from rank {dist.get_rank()} of {dist.get_world_size()}")
        if "--out" in sys.argv:
            out = sys.argv[sys.argv.index("--out") + 1]
            if dist.get_rank() == 0:
                open(out, "w").write('{"world": %d}' % dist.get_world_size())
        dist.barrier()
        dist.destroy_process_group()
        """)


# A worker that records its exception in its torchrun error file through accelkit.dist.session()
# (ErrorHandler.record_exception, as torch's @record): the course's workers fail this way.
_RAISES_ON_RANK_ONE = """\
    import time
    import accelkit as ak

    with ak.dist.session(timeout_s=60) as info:
        if info.rank == 1:
            raise ValueError("boom on rank one")
        time.sleep(600)   # rank 0 would wait forever: torchrun must stop it
    """


# ----------------------------------------------------------------------------- torchrun
@pytest.mark.slow
def test_clean_run_streams_each_rank_and_returns_the_out_file(ok_worker, capsys, tmp_path):
    t0 = time.perf_counter()
    res = launch.torchrun(ok_worker, nproc=2, timeout_s=60, out=tmp_path / "r.json")
    assert time.perf_counter() - t0 < 60 + SLACK_S
    assert res.ok and res.exit_codes == {0: 0, 1: 0} and not res.timed_out
    assert res.failures == {} and res.failed_rank is None
    assert "hello from rank 0 of 2" in res.logs[0] and "hello from rank 1 of 2" in res.logs[1]
    out = capsys.readouterr().out
    assert "[rank0]: hello from rank 0 of 2" in out and "[rank1]: hello from rank 1 of 2" in out
    assert "--standalone" in res.command and "--nproc-per-node=2" in res.command
    assert res.command.endswith(f"--out {tmp_path / 'r.json'}")
    assert res.summary().startswith("ok:")
    assert res.read_json() == {"world": 2}
    _no_leftovers(res)


@pytest.mark.slow
def test_a_worker_that_raises_is_named_with_its_recorded_exception(tmp_path):
    script = _script(tmp_path, "fail.py", _RAISES_ON_RANK_ONE)
    (tmp_path / "stale.json").write_text("{}")  # a previous run's result must not survive
    t0 = time.perf_counter()
    with pytest.raises(launch.LaunchError) as info:
        launch.torchrun(script, nproc=2, timeout_s=60, stream=False, out=tmp_path / "stale.json")
    assert time.perf_counter() - t0 < 60 + SLACK_S
    msg = str(info.value)
    assert msg.splitlines()[0] == "rank 1 failed first (exit code 1): ValueError: boom on rank one"
    assert "its traceback (from its error file):" in msg
    assert 'raise ValueError("boom on rank one")' in msg  # the traceback's tail
    if RECORDS_STOPPED:  # the failing rank's error comes before the others' exit codes
        assert msg.index("ValueError: boom on rank one") < msg.index("other ranks")
    assert ("rank 0 was stopped by SIGTERM" in msg) == RECORDS_STOPPED
    res = info.value.result
    stopped = {0: -15} if RECORDS_STOPPED else {}
    assert res.failed_rank == 1 and res.exit_codes == {**stopped, 1: 1} and not res.timed_out
    fail = res.failures[1]
    assert fail.error_file is not None and fail.error_file.is_relative_to(res.log_dir)
    assert fail.error_file.name == "error.json" and fail.error_file.parent.name == "1"
    assert res.failures[0].error_file is None if RECORDS_STOPPED else 0 not in res.failures
    with pytest.raises(FileNotFoundError):
        res.read_json()
    _no_leftovers(res)


@pytest.mark.slow
def test_a_worker_without_an_error_file_is_explained_by_its_output(tmp_path):
    script = _script(tmp_path, "plain.py", """\
        import time
        import torch.distributed as dist
        dist.init_process_group("gloo")
        if dist.get_rank() == 0:
            raise KeyError("no record of this one")
        time.sleep(600)
        """)
    res = launch.torchrun(script, nproc=2, timeout_s=60, stream=False, check=False)
    assert res.failed_rank == 0 and res.exit_codes == {0: 1, **({1: -15} if RECORDS_STOPPED else {})}
    assert res.failures[0].error_file is None and res.failures[0].message == ""
    summary = res.summary()
    assert summary.splitlines()[0] == "rank 0 failed first (exit code 1); its own output:"
    assert "KeyError: 'no record of this one'" in summary
    _no_leftovers(res)


@pytest.mark.slow
def test_a_worker_killed_by_a_signal_is_named_with_its_signal(tmp_path):
    script = _script(tmp_path, "killed.py", """\
        import os, signal, time
        import torch.distributed as dist
        dist.init_process_group("gloo")
        if dist.get_rank() == 1:
            print("about to die", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(600)
        """)
    with pytest.raises(launch.LaunchError) as info:
        launch.torchrun(script, nproc=2, timeout_s=60, stream=False)
    msg = str(info.value)
    assert msg.splitlines()[0] == "rank 1 failed first (exit code -9, SIGKILL); its own output:"
    assert "about to die" in msg and ("rank 0 was stopped by SIGTERM" in msg) == RECORDS_STOPPED
    res = info.value.result
    assert res.exit_codes == {**({0: -15} if RECORDS_STOPPED else {}), 1: -9}
    assert res.failures[1].error_file is None
    _no_leftovers(res)


@pytest.mark.slow
def test_hanging_worker_is_killed_with_its_children_and_shows_each_ranks_stack(tmp_path):
    # Rank 1 waits in a collective, rank 0 in its own code; each registered the stack signal
    # (faulthandler), and each also starts a grandchild in its own session: it must die too.
    # 15 s: time for torchrun and both workers to start and reach the hang on a 2-core machine.
    script = _script(tmp_path, "hang.py", """\
        import subprocess, sys, time
        import torch.distributed as dist
        from accelkit import dist as akdist

        def waiting_here():
            time.sleep(600)

        akdist.enable_stack_dumps()
        dist.init_process_group("gloo")
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                         start_new_session=True)
        print("hanging", flush=True)
        dist.barrier() if dist.get_rank() == 1 else waiting_here()
        """)
    timeout = 15
    t0 = time.perf_counter()
    res = launch.torchrun(script, nproc=2, timeout_s=timeout, check=False, stream=False)
    took = time.perf_counter() - t0
    assert res.timed_out and not res.ok
    assert timeout <= took < timeout + SLACK_S
    summary = res.summary()
    assert summary.startswith(f"TIMEOUT: the run passed its time limit of {timeout} s")
    assert res.killed >= 3  # torchrun + 2 workers (+ grandchildren)
    assert res.failed_rank is None and res.exit_codes == {}  # no rank failed: it was killed
    with pytest.raises(launch.LaunchError, match="TIMEOUT"):
        res.check()
    # fails if the launcher stops asking for the stacks, or stops reading them back per rank
    assert set(res.stacks) == {0, 1}
    where = res.where()
    assert "waiting_here" in where[0] and where[1].startswith("barrier (")
    assert "where each rank was (its Python stack when the time limit came" in summary
    assert f"rank 1: {where[1]}" in summary
    _no_leftovers(res)


@pytest.mark.slow
def test_busy_ports_and_a_lingering_group_do_not_block_a_new_run(ok_worker, tmp_path):
    hang = _script(tmp_path, "linger.py", """\
        import time
        import torch.distributed as dist
        dist.init_process_group("gloo")
        time.sleep(600)
        """)
    import socket

    lingering_id = "lingering-test"
    env = dict(os.environ, **{procs.MARKER_ENV: lingering_id})
    old = subprocess.Popen(scripts.torchrun_command(hang, nproc_per_node=2), env=env,
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
        res = launch.torchrun(ok_worker, nproc=2, timeout_s=60, stream=False)
        assert res.ok and old.poll() is None  # the old group still runs, the new one passed
    finally:
        for s in socks:
            s.close()
        procs.kill_all([procs.process(old.pid)], lingering_id, grace_s=2)
        old.wait(timeout=10)
    _no_leftovers(lingering_id)
    _no_leftovers(res)


@pytest.mark.slow
def test_two_nodes_on_loopback_name_a_failure_on_the_second_by_its_global_rank(tmp_path):
    # the second agent's rank ran (it raised after the rendezvous): the multi-node command works
    script = _script(tmp_path, "fail.py", _RAISES_ON_RANK_ONE)
    res = launch.torchrun(script, nproc=1, nnodes=2, timeout_s=90, stream=False, check=False)
    assert len(res.commands) == 2 and res.commands[0] == res.commands[1]
    for flag in ("--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:"):
        assert flag in res.command
    assert res.failed_rank == 1 and res.exit_codes[1] == 1
    assert res.failures[1].local_rank == 0  # rank 1 is local rank 0 of the second agent
    assert res.summary().splitlines()[0] == (
        "rank 1 failed first (exit code 1): ValueError: boom on rank one")
    _no_leftovers(res)


# ----------------------------------------------------------------------------- TF / python
@pytest.mark.slow
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
    res = launch.python(bad, n=2, tf=True, timeout_s=60, check=False, stream=False)
    assert time.perf_counter() - t0 < 15  # worker 0 was stopped, not waited for
    assert res.failed_rank == 1 and res.exit_codes == {0: -15, 1: 1}
    assert res.summary().splitlines()[0] == "rank 1 failed first (exit code 1); its own output:"
    assert "worker one gives up" in res.summary()
    _no_leftovers(res)


@pytest.mark.slow
def test_python_passes_out_and_reads_a_folder(tmp_path):
    script = _script(tmp_path, "w.py", """\
        import json, pathlib, sys
        out = pathlib.Path(sys.argv[sys.argv.index("--out") + 1])
        out.mkdir()
        (out / "log.json").write_text(json.dumps({"args": sys.argv[1:3]}))
        """)
    res = launch.python(script, ["--x", 1], out=tmp_path / "res", timeout_s=30, stream=False)
    assert res.out == tmp_path / "res" and res.read_json("log.json") == {"args": ["--x", "1"]}
    again = launch.python(script, ["--x", 2], out=tmp_path / "res", timeout_s=30, stream=False)
    assert again.read_json("log.json")["args"] == ["--x", "2"]  # the old folder was cleared


# ----------------------------------------------------------------------------- spawn
@pytest.mark.slow
def test_spawn_shows_the_childs_real_error_for_an_unimportable_function(tmp_path, monkeypatch):
    # A function whose module exists only in this process, like a notebook's __main__.
    fake = types.ModuleType("accelkit_fake_notebook")
    exec("def work(rank):\n    print('hi', rank)\n", fake.__dict__)
    monkeypatch.setitem(sys.modules, "accelkit_fake_notebook", fake)
    with pytest.raises(launch.LaunchError) as info:
        launch.spawn(fake.work, nprocs=2, timeout_s=60)
    msg = str(info.value)
    assert "ProcessExitedException" in msg and "No module named 'accelkit_fake_notebook'" in msg
    assert procs.MARKER_ENV not in os.environ  # restored


@pytest.mark.slow
def test_spawn_runs_a_worker_script_imported_by_file(tmp_path, monkeypatch):
    # The fix for the error above: the function lives in a script; the children import it
    # from the script's folder, which is not on this process's sys.path.
    monkeypatch.delitem(sys.modules, "spawn_square", raising=False)
    square = scripts.import_worker("spawn_square.py")
    path_before = list(sys.path)
    launch.spawn(square.square, nprocs=2, args=(str(tmp_path),), timeout_s=60)
    assert sys.path == path_before
    got = sorted(json.loads(p.read_text())["square"] for p in tmp_path.glob("rank*.json"))
    assert got == [0, 1]


@pytest.mark.slow
def test_spawn_timeout_kills_the_children(tmp_path, monkeypatch):
    _script(tmp_path, "spawn_hang_mod.py", "import time\ndef work(rank):\n    time.sleep(600)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import spawn_hang_mod

    t0 = time.perf_counter()
    with pytest.raises(TimeoutError, match="killed"):
        launch.spawn(spawn_hang_mod.work, nprocs=2, timeout_s=3)
    assert time.perf_counter() - t0 < 3 + SLACK_S


# ----------------------------------------------------------------------------- pure helpers
def test_summary_of_a_recorded_failure_shows_what_came_before_the_traceback():
    tb = "Traceback (most recent call last):\n  File \"w.py\", line 3\nValueError: bad\n"
    fail = scripts.RankFailure(rank=1, local_rank=1, exitcode=1, pid=9, timestamp=0,
                               message="ValueError: bad", traceback=tb)
    res = launch.LaunchResult("torchrun", [["x"]], exit_codes={0: -15, 1: 1},
                              logs={1: "loading data\n" + tb}, returncodes=[1],
                              failed_rank=1, failures={1: fail})
    lines = res.summary().splitlines()
    assert lines[0] == "rank 1 failed first (exit code 1): ValueError: bad"
    assert lines[1] == "its traceback (from its error file):"
    assert lines[lines.index("its last output before that:") + 1] == "loading data"
    assert lines[-1] == "other ranks: rank 0 was stopped by SIGTERM"
    unknown = launch.LaunchResult("torchrun", [["x"]], returncodes=[1], failed_rank=2)
    assert unknown.summary().startswith("rank 2 failed first (exit code unknown)")


def test_summary_names_a_rank_whose_exit_code_went_unrecorded():
    # torch 2.9: the agent recorded rank 1 only; rank 0's error file was read beside it
    tb = "Traceback (most recent call last):\nRuntimeError: Timed out\n"
    timed = scripts.RankFailure(rank=1, local_rank=1, exitcode=1, pid=9, timestamp=1,
                                message="RuntimeError: Timed out", traceback=tb)
    peer = scripts.RankFailure(rank=0, local_rank=0, exitcode=None, pid=None, timestamp=1,
                               message="RuntimeError: Connection closed by peer",
                               traceback=tb.replace("Timed out", "Connection closed by peer"))
    res = launch.LaunchResult("torchrun", [["x"]], exit_codes={1: 1}, returncodes=[1],
                              failed_rank=1, failures={0: peer, 1: timed})
    assert not res.ok
    assert ("other ranks: rank 0 recorded an error (this torch did not record its exit code)"
            in res.summary().splitlines())


def test_launchers_validate_their_arguments(tmp_path, ok_worker):
    with pytest.raises(FileNotFoundError):
        launch.torchrun(tmp_path / "missing.py")
    with pytest.raises(ValueError, match="timeout_s"):
        launch.torchrun(ok_worker, timeout_s=0)
    with pytest.raises(ValueError, match="threads"):
        launch.torchrun(ok_worker, threads=0)
    with pytest.raises(ValueError, match="nproc_per_node"):
        launch.torchrun(ok_worker, nproc=0, out=tmp_path / "keep.json")
    with pytest.raises(ValueError, match="n must be"):
        launch.python(ok_worker, n=0)
    with pytest.raises(ValueError, match="no out="):
        launch.LaunchResult("python", []).read_json()


def test_worker_plan():
    plan = launch.worker_plan()
    assert plan.nproc >= 2 and plan.device in ("cpu", "cuda") and plan.reason
    if plan.device == "cpu":
        assert plan.env == {"CUDA_VISIBLE_DEVICES": ""}
    assert launch.worker_plan(3).nproc == 3
    with pytest.raises(ValueError):
        launch.worker_plan(0)


def test_worker_plan_torchrun_passes_its_nproc_and_env(monkeypatch):
    seen = {}
    monkeypatch.setattr(launch, "torchrun", lambda script, args, **kw: seen.update(kw) or kw)
    plan = launch.WorkerPlan(3, "cpu", {"CUDA_VISIBLE_DEVICES": ""}, "test")
    plan.torchrun("w.py", ["--a"], out="r.json", timeout_s=5)
    assert seen == {"nproc": 3, "env": {"CUDA_VISIBLE_DEVICES": ""}, "out": "r.json",
                    "timeout_s": 5}
    plan.torchrun("w.py", nproc=1, env={"X": "1"})
    assert seen["nproc"] == 1 and seen["env"] == {"CUDA_VISIBLE_DEVICES": "", "X": "1"}


# ----------------------------------------------------------------------------- stuck collectives
# The bar: the stuck ranks and their collectives are reported within 45 s.
REPORT_S = 45


@pytest.mark.slow
def test_uneven_inputs_name_each_stuck_rank_and_its_collective_at_the_collective_timeout():
    t0 = time.perf_counter()
    with pytest.raises(launch.LaunchError) as info:
        launch.torchrun(scripts.worker_script("uneven_inputs.py"), ["--split", "by_hand"],
                        nproc=2, timeout_s=60, collective_timeout_s=3, stream=False,
                        env={"CUDA_VISIBLE_DEVICES": ""})
    took = time.perf_counter() - t0
    res, msg = info.value.result, str(info.value)
    assert took < REPORT_S and not res.timed_out  # the workers' timeout, not the launcher's
    assert "Timed out waiting 3000ms" in msg
    where = res.where()
    assert where[0].startswith("backward (torch/_tensor.py") and "uneven_inputs.py" in where[0]
    assert where[1].startswith("barrier (torch/distributed/distributed_c10d.py")
    assert "in teardown" in where[1]
    assert f"rank 0: {where[0]}" in msg and f"rank 1: {where[1]}" in msg
    _no_leftovers(res)


def test_collective_timeout_is_validated(ok_worker):
    with pytest.raises(ValueError, match="collective_timeout_s"):
        launch.torchrun(ok_worker, collective_timeout_s=0)
