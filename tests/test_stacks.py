"""accelkit.scripts' stack reading: faulthandler dumps and tracebacks as frames, in one line."""

from accelkit import scripts as stacks


def _blocked_in_barrier():  # a stand-in for torch's barrier, for the dump below
    import faulthandler
    import tempfile

    with tempfile.TemporaryFile("w+") as f:
        faulthandler.dump_traceback(file=f, all_threads=True)
        f.seek(0)
        return "some output first\n" + f.read() + "output after the dump\n"


def test_last_stack_reads_the_main_thread_of_a_real_faulthandler_dump():
    log = _blocked_in_barrier()
    frames = stacks.last_stack("an older dump:\nThread 0x1 (most recent call first):\n"
                              '  File "old.py", line 1 in old\n\n' + log)
    assert frames[0].func == "_blocked_in_barrier"  # innermost first, from the last dump
    assert frames[1].func == "test_last_stack_reads_the_main_thread_of_a_real_faulthandler_dump"
    assert "faulthandler.dump_traceback" in frames[0].code  # source line filled in
    assert all(f.func != "old" for f in frames)
    assert stacks.last_stack("no dump here\n") == []


def test_where_waiting_names_torchs_call_and_the_callers_line():
    torch_dir = "/venv/lib/python3.11/site-packages/torch"
    frames = [stacks.Frame(f"{torch_dir}/distributed/distributed_c10d.py", 5356, "barrier"),
              stacks.Frame(f"{torch_dir}/distributed/c10d_logger.py", 83, "wrapper"),
              stacks.Frame("/repo/accelkit/dist.py", 283, "teardown", "dist.barrier()"),
              stacks.Frame("/repo/train.py", 9, "<module>", "main()")]
    assert stacks.where_waiting(frames) == (
        "barrier (torch/distributed/distributed_c10d.py:5356), called from "
        "accelkit/dist.py:283 in teardown: dist.barrier()")
    backward = [stacks.Frame(f"{torch_dir}/autograd/graph.py", 979, "_engine_run_backward"),
                stacks.Frame(f"{torch_dir}/_tensor.py", 623, "backward"),
                stacks.Frame("/w/uneven.py", 62, "train", "loss.backward()")]
    assert stacks.where_waiting(backward).startswith("backward (torch/_tensor.py:623), called "
                                                    "from uneven.py:62 in train")
    assert stacks.where_waiting(frames[2:]) == "accelkit/dist.py:283 in teardown: dist.barrier()"
    assert stacks.where_waiting([]) == "(no stack)"


def test_traceback_frames_are_innermost_first_with_their_code():
    import traceback

    def inner():
        raise ValueError("x")

    try:
        inner()
    except ValueError:
        text = traceback.format_exc()
    frames = stacks.traceback_frames(text)
    assert frames[0].func == "inner"
    assert frames[1].func == "test_traceback_frames_are_innermost_first_with_their_code"
    assert frames[0].code == 'raise ValueError("x")'
