"""accelkit.scripts: torchrun's command line, its error files and failure records (no processes)."""

import json
import signal
from pathlib import Path

import pytest

from accelkit import scripts


def test_torchrun_command():
    single = scripts.torchrun_command("w.py", ["--x", 1], nproc_per_node=4)
    assert single[1:] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
                          "w.py", "--x", "1"]
    multi = scripts.torchrun_command("w.py", nproc_per_node=8, nnodes=2,
                                     rdzv_endpoint="node0:29400", rdzv_id="job")
    assert "--nnodes=2" in multi and "--rdzv-endpoint=node0:29400" in multi
    ours = scripts.torchrun_command("w.py", module="accelkit.scripts", log_dir="/tmp/l")
    assert ours[1:3] == ["-m", "accelkit.scripts"] and "--log-dir=/tmp/l" in ours
    assert scripts.torchrun_command("w.py", as_torchrun=True)[0] == "torchrun"
    with pytest.raises(ValueError, match="rdzv_endpoint"):
        scripts.torchrun_command("w.py", nnodes=2)
    with pytest.raises(ValueError, match="nproc_per_node"):
        scripts.torchrun_command("w.py", nproc_per_node=0)


def test_read_error_file_in_both_layouts(tmp_path):
    handler = tmp_path / "a.json"  # what ErrorHandler.record_exception / @record write
    handler.write_text(json.dumps({"message": {"message": "ValueError: boom", "extraInfo": {
        "py_callstack": "Traceback (most recent call last):\nValueError: boom\n",
        "timestamp": "1700000000"}}}))
    assert scripts.read_error_file(handler) == (
        "ValueError: boom", "Traceback (most recent call last):\nValueError: boom\n")
    plain = tmp_path / "b.json"
    plain.write_text(json.dumps({"message": "custom text", "timestamp": 1}))
    assert scripts.read_error_file(plain) == ("custom text", "")
    broken = tmp_path / "c.json"
    broken.write_text("{not json")
    assert scripts.read_error_file(broken) == ("", "")
    assert scripts.read_error_file(tmp_path / "missing.json") == ("", "")


def test_read_failures_joins_reports_and_error_files(tmp_path):
    err = tmp_path / "run" / "attempt_0" / "1" / "error.json"
    err.parent.mkdir(parents=True)
    err.write_text(json.dumps({"message": {"message": "ValueError: boom", "extraInfo": {
        "py_callstack": "Traceback ...\nValueError: boom\n", "timestamp": "1"}}}))
    (err.parent / "stderr.log").write_text("the traceback\n")
    report = tmp_path / "agent0.json"
    report.write_text(json.dumps({"failures": {
        "0": {"local_rank": 0, "pid": 11, "exitcode": -15, "error_file": "<N/A>",
              "timestamp": 1},  # stopped by torchrun, noticed "earlier" (whole seconds)
        "1": {"local_rank": 1, "pid": 12, "exitcode": 1, "error_file": str(err),
              "timestamp": 2}}}))
    failures = scripts.read_failures([report, tmp_path / "agent1-missing.json"])
    assert list(failures) == [0, 1]
    assert failures[1].message == "ValueError: boom" and failures[1].error_file == err
    assert failures[0].error_file is None and failures[0].exitcode == -signal.SIGTERM
    assert failures[1].exitcode == 1
    assert scripts.root_cause(failures) == 1
    assert scripts.rank_log_files(tmp_path, failures[1]) == "the traceback\n"
    assert scripts.rank_log_files(tmp_path, failures[0]) == ""  # no folder for local rank 0
    assert scripts.root_cause({}) is None


def _error_file(path, message, frames=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"message": {"message": message, "extraInfo": {
        "py_callstack": f"Traceback (most recent call last):\n{frames}{message}\n",
        "timestamp": "1"}}}))
    return path


def test_read_failures_adds_ranks_the_agent_left_out_from_their_error_files(tmp_path):
    # torch 2.9's agent reports only the rank it saw fail first (seen on Colab's TPU-runtime
    # versions: rank 1 timed out in the barrier, rank 0's "closed by peer" left out)
    attempt = tmp_path / "run" / "attempt_0"
    timed = _error_file(attempt / "1" / "error.json", "RuntimeError: Timed out waiting 3000ms",
                        '  File "dist.py", line 285, in teardown\n    dist.barrier()\n')
    peer = _error_file(attempt / "0" / "error.json",
                       "RuntimeError: Connection closed by peer [127.0.0.1]:1")
    (attempt / "2").mkdir()  # a rank that wrote no error file: nothing is made up for it
    (attempt / "3").mkdir()
    (attempt / "3" / "error.json").write_text('{"message": ""}')  # empty: not a failure
    report = tmp_path / "agent0.json"
    report.write_text(json.dumps({"failures": {"1": {
        "local_rank": 1, "pid": 12, "exitcode": 1, "error_file": str(timed), "timestamp": 2}}}))
    failures = scripts.read_failures([report])
    assert list(failures) == [0, 1]
    assert failures[0].error_file == peer and failures[0].message.endswith("closed by peer [127.0.0.1]:1")
    assert failures[0].exitcode is None and failures[0].pid is None
    assert failures[1].exitcode == 1 and failures[1].pid == 12
    assert scripts.root_cause(failures) == 1  # the peer-gone rank is not the cause


def test_read_failures_places_left_out_ranks_on_their_node(tmp_path):
    # the second agent (node 1, 2 ranks per node) reported global rank 3 = its local rank 1
    attempt = tmp_path / "node1run" / "attempt_0"
    reported = _error_file(attempt / "1" / "error.json", "ValueError: boom")
    _error_file(attempt / "0" / "error.json", "RuntimeError: Connection reset by peer")
    report = tmp_path / "agent1.json"
    report.write_text(json.dumps({"failures": {"3": {
        "local_rank": 1, "pid": 7, "exitcode": 1, "error_file": str(reported), "timestamp": 2}}}))
    failures = scripts.read_failures([report])
    assert list(failures) == [2, 3] and failures[2].local_rank == 0
    # a report without error files places nobody else
    bare = tmp_path / "agent0.json"
    bare.write_text(json.dumps({"failures": {"0": {
        "local_rank": 0, "pid": 7, "exitcode": -9, "error_file": "<N/A>", "timestamp": 2}}}))
    assert list(scripts.read_failures([bare])) == [0]


def test_root_cause_without_error_files_prefers_a_real_signal_to_sigterm():
    def f(rank, code, stamp):
        return scripts.RankFailure(rank=rank, local_rank=rank, exitcode=code, pid=rank,
                                   timestamp=stamp)

    killed = {0: f(0, -signal.SIGTERM, 5), 1: f(1, -signal.SIGKILL, 6)}
    assert scripts.root_cause(killed) == 1
    assert scripts.root_cause({0: f(0, 1, 7), 1: f(1, 1, 6)}) == 1  # earliest


def test_root_cause_prefers_a_rank_whose_own_collective_failed_to_one_whose_peer_went_away():
    # seen in CI: rank 1 timed out in its barrier and closed its sockets; rank 0, waiting in
    # an all-reduce, wrote "Connection closed by peer" a moment before rank 1's error file
    def f(rank, stamp, message):
        return scripts.RankFailure(rank=rank, local_rank=rank, exitcode=1, pid=rank,
                                   timestamp=stamp, error_file=Path(f"{rank}.json"),
                                   message=message)

    gone = "RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [::1]:5"
    timed_out = "DistBackendError: [gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting"
    failures = {0: f(0, 10.0, gone), 1: f(1, 10.4, timed_out)}
    assert scripts.root_cause(failures) == 1
    assert scripts.root_cause({0: f(0, 10.0, gone), 1: f(1, 10.4, gone)}) == 0  # earliest
