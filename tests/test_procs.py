"""accelkit.procs: process groups that stream, fail fast, time out and leave nothing behind.

Reading the stack dumps back (accelkit.scripts) is tested in test_stacks.py."""

import os
import socket
import sys
import time

import pytest

from accelkit import procs
from accelkit import scripts as stacks

SLACK_S = 10


def _no_leftovers(launch_id):
    deadline = time.perf_counter() + 3
    while procs.leftover_processes(launch_id) and time.perf_counter() < deadline:
        time.sleep(0.1)
    assert procs.leftover_processes(launch_id) == []


def _py(code, rank=None, **env):
    return procs.Child([sys.executable, "-c", code], procs.child_env(env), rank)


def test_free_ports_are_distinct_and_bindable():
    ports = procs.free_ports(3)
    assert len(set(ports)) == 3
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[0]))


def test_describe_exit():
    assert procs.describe_exit(0) == "exited 0"
    assert procs.describe_exit(-15) == "was stopped by SIGTERM"
    assert procs.describe_exit(None) == "gave no exit code"


def test_child_env_drops_an_outer_launch_and_finds_this_checkout(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", "/outer/error.json")
    env = procs.child_env({"X": 1}, threads=2)
    assert "RANK" not in env and "TORCHELASTIC_ERROR_FILE" not in env
    assert env["X"] == "1" and env["OMP_NUM_THREADS"] == "2" and env["PYTHONUNBUFFERED"] == "1"
    root = os.path.dirname(os.path.dirname(os.path.abspath(procs.__file__)))
    assert env["PYTHONPATH"].split(os.pathsep)[0] == root


def test_ranked_lines_split_torchrun_prefixes_and_hide_absl_lines():
    printed = []
    lines = procs.RankedLines([None, 5], printer=printed.append)
    lines(0, "[rank1]:[rank1]: Traceback")  # torch repeats the prefix on exception lines
    lines(0, "[rank0]:hello")
    lines(0, "torchrun's own message")
    lines(1, "I0000 00:00:17.123 42 file.cc:12] absl noise")
    lines(1, "plain")
    assert lines.logs() == {0: "hello\n", 1: "Traceback\n",
                            5: "I0000 00:00:17.123 42 file.cc:12] absl noise\nplain\n"}
    assert lines.launcher_log() == "torchrun's own message\n"
    assert printed == ["[rank1]: Traceback", "[rank0]: hello", "[rank5]: plain"]
    quiet = procs.RankedLines([0], stream=False, printer=printed.append)
    quiet(0, "x")
    assert len(printed) == 3


@pytest.mark.slow
def test_group_streams_lines_and_a_last_line_without_newline():
    seen = []
    launch_id = procs.new_launch_id()
    run = procs.run_group([_py("print('a'); print('b', end='')", 0),
                           _py("import os; print(os.environ['ACCELKIT_LAUNCH_ID'])", 1)],
                          launch_id=launch_id, timeout_s=30,
                          on_line=lambda i, s: seen.append((i, s)))
    assert run.returncodes == [0, 0] and not run.timed_out
    assert [s for i, s in seen if i == 0] == ["a", "b"]
    assert seen.count((1, launch_id)) == 1  # the marker reaches the child
    _no_leftovers(launch_id)


@pytest.mark.slow
def test_fail_fast_stops_the_others():
    launch_id = procs.new_launch_id()
    t0 = time.perf_counter()
    run = procs.run_group([_py("import time; time.sleep(600)", 0), _py("raise SystemExit(3)", 1)],
                          launch_id=launch_id, timeout_s=60, on_line=lambda i, s: None,
                          fail_fast=True, grace_s=1)
    assert time.perf_counter() - t0 < 15
    assert run.returncodes == [-15, 3] and not run.timed_out
    _no_leftovers(launch_id)


@pytest.mark.slow
def test_timeout_kills_the_group_with_a_grandchild_in_its_own_session():
    # The grandchild keeps the output pipe open and lives in another session: it must die
    # too, and the readers must still end.
    code = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
            " start_new_session=True)\n"
            "print('hanging', flush=True)\ntime.sleep(600)\n")
    launch_id = procs.new_launch_id()
    seen = []
    t0 = time.perf_counter()
    run = procs.run_group([_py(code, 0)], launch_id=launch_id, timeout_s=3,
                          on_line=lambda i, s: seen.append(s), grace_s=1)
    assert run.timed_out and 3 <= time.perf_counter() - t0 < 3 + SLACK_S
    assert run.killed >= 2 and run.returncodes[0] is not None and run.returncodes[0] < 0
    assert seen == ["hanging"]
    _no_leftovers(launch_id)


# ----------------------------------------------------------------------------- stack signal
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.slow
def test_only_processes_that_registered_the_stack_signal_get_it():
    code = ("import faulthandler, signal, sys, time\n"
            "if sys.argv[1] == '1': faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
            "print('ready', flush=True)\n"
            "def waiting_here(): time.sleep(30)\n"
            "waiting_here()\n")
    lines = procs.RankedLines([0, 1], stream=False)
    children = [procs.Child([sys.executable, "-c", code, str(r)], procs.child_env(), r)
                for r in (0, 1)]
    launch_id = procs.new_launch_id()
    run = procs.run_group(children, launch_id=launch_id, timeout_s=3, on_line=lines)
    assert run.timed_out and run.stacks_requested == 1  # rank 0 would have died of SIGUSR1
    logs = lines.logs()
    assert stacks.last_stack(logs[1])[0].func == "waiting_here" and not stacks.last_stack(logs[0])
    _no_leftovers(launch_id)
