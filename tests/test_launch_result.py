"""accelkit.launch_result: the report of a finished launch (launches themselves: test_launch.py)."""

import pytest

from accelkit import elastic, launch, launch_result


def test_launch_re_exports_the_result_and_the_error():
    assert launch.LaunchResult is launch_result.LaunchResult
    assert launch.LaunchError is launch_result.LaunchError


def test_summary_of_a_recorded_failure_shows_what_came_before_the_traceback():
    tb = "Traceback (most recent call last):\n  File \"w.py\", line 3\nValueError: bad\n"
    fail = elastic.RankFailure(rank=1, local_rank=1, exitcode=1, pid=9, timestamp=0,
                               message="ValueError: bad", traceback=tb)
    res = launch_result.LaunchResult("torchrun", [["x"]], exit_codes={0: -15, 1: 1},
                                     logs={1: "loading data\n" + tb}, returncodes=[1],
                                     failed_rank=1, failures={1: fail})
    lines = res.summary().splitlines()
    assert lines[0] == "rank 1 failed first (exit code 1): ValueError: bad"
    assert lines[1] == "its traceback (from its error file):"
    assert lines[lines.index("its last output before that:") + 1] == "loading data"
    assert lines[-1] == "other ranks: rank 0 was stopped by SIGTERM"
    unknown = launch_result.LaunchResult("torchrun", [["x"]], returncodes=[1],
                                         failed_rank=2)
    assert unknown.summary().startswith("rank 2 failed first (exit code unknown)")


def test_summary_names_a_rank_whose_exit_code_went_unrecorded():
    # torch 2.9: the agent recorded rank 1 only; rank 0's error file was read beside it
    tb = "Traceback (most recent call last):\nRuntimeError: Timed out\n"
    timed = elastic.RankFailure(rank=1, local_rank=1, exitcode=1, pid=9, timestamp=1,
                                message="RuntimeError: Timed out", traceback=tb)
    peer = elastic.RankFailure(rank=0, local_rank=0, exitcode=None, pid=None, timestamp=1,
                               message="RuntimeError: Connection closed by peer",
                               traceback=tb.replace("Timed out", "Connection closed by peer"))
    res = launch_result.LaunchResult("torchrun", [["x"]], exit_codes={1: 1}, returncodes=[1],
                                     failed_rank=1, failures={0: peer, 1: timed})
    assert not res.ok
    assert ("other ranks: rank 0 recorded an error (this torch did not record its exit code)"
            in res.summary().splitlines())


def test_spawn_error_quotes_the_last_traceback_of_the_childrens_stderr():
    stderr = "noise\nTraceback (most recent call last):\n  File \"x.py\", line 1\nAttributeError: f\n"
    err = launch_result.spawn_error(ValueError("child failed"), stderr)
    assert str(err).startswith("ValueError: child failed\n--- a child's own stderr ---\nTraceback")
    assert "noise" not in str(err) and err.result.logs == {0: stderr}
    with pytest.raises(ValueError, match="no out="):
        err.result.read_json()
