"""docs/RECIPES.md runs: every code block of it is executed here, on a CPU.

How each section's blocks run is one row of ``TECHNIQUES``:

- ``exec``: each ```python block in a fresh namespace in this process (torch only; fast);
- ``process``: each ```python block in a fresh Python process (TensorFlow, Keras, JAX: their
  device settings must come before their first operation, and Keras's policy is global);
- ``command``: a block whose first line is ``# file: NAME`` is written to a temporary folder and
  the section's ```bash block is run there (``torchrun`` with 2 gloo ranks, ``python``), with a
  timeout; the section's other python blocks then run in a fresh process in that folder (the
  resume recipe reads the checkpoint the FSDP2 script wrote).

``test_recipes_cover_the_course`` fails when a technique the course teaches has no section (a
removed recipe), when a section lost the API it is named after, or when a new section has no
row here (a block no test runs).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "RECIPES.md"
TIMEOUT_S = 240  # per command; a hung collective must not hang the suite


@dataclass(frozen=True)
class Technique:
    """One recipe: its heading in RECIPES.md, the API lines its code must show, how it runs."""

    heading: str
    tokens: tuple[str, ...]
    how: str  # "exec", "process" or "command"
    expect: str = ""  # a text the output of a "process" section must contain


# The techniques the course teaches (issue 24, item 3; issue 26's practice), one section each.
TECHNIQUES = (
    Technique("Choose the device", ("torch.accelerator.is_available()", ".to(device)"), "exec"),
    Technique("Time GPU and CPU work correctly",
              ("benchmark.Timer(", "blocked_autorange(", "torch.accelerator.synchronize()"), "exec"),
    Technique("TensorFlow: memory growth, before anything else",
              ("tf.config.experimental.set_memory_growth(", "set_logical_device_configuration("),
              "process", expect="CPU:1"),
    Technique("Mixed precision in PyTorch: autocast + GradScaler, with gradient clipping",
              ("torch.autocast(", "torch.amp.GradScaler(", "scaler.unscale_(opt)",
               "clip_grad_norm_("), "exec"),
    Technique("Mixed precision in Keras: a global dtype policy",
              ("keras.mixed_precision.set_global_policy(",), "process",
              expect="bfloat16 float32"),
    Technique("torch.compile", ("torch.compile(",), "exec"),
    Technique("Compile in practice: regional compilation and recompile logs",
              ("block.compile()", "torch._logging.set_logs(recompiles=True, graph_breaks=True)"), "exec"),
    Technique("Fused AdamW", ("fused=True",), "exec"),
    Technique("DDP: the script and the torchrun command",
              ("DistributedDataParallel", "DistributedSampler", "set_epoch(", "no_sync()",
               "torchrun --standalone --nproc-per-node 2"), "command"),
    Technique("Gradient accumulation with no_sync", ("no_sync()",), "exec"),
    Technique("FSDP2: fully_shard",
              ("fully_shard(", "MixedPrecisionPolicy(", "dcp.save(", "full_state_dict=True"),
              "command"),
    Technique("Resume from torch.distributed.checkpoint", ("dcp.load(", "set_state_dict("),
              "command"),
    Technique("Memory: where the bytes go",
              ("profile_memory=True", "torch.cuda.memory._record_memory_history(",
               "expandable_segments:True"), "exec"),
    Technique("Debug a distributed job",
              ("TORCH_DISTRIBUTED_DEBUG=DETAIL", "NCCL_DEBUG=INFO", "dist.get_backend_config()"), "exec"),
    Technique("JAX: sharding on a device mesh",
              ("jax.make_mesh(", "NamedSharding(", "jax.device_put(", "jax.jit("), "process",
              expect="'data': 2, 'model': 2"),
    Technique("Activation checkpointing",
              ("checkpoint(block, x, use_reentrant=False)", "create_selective_checkpoint_contexts"), "exec"),
    Technique("DataLoader workers",
              ("num_workers=", "persistent_workers=True", "prefetch_factor=", "pin_memory=",
               'if __name__ == "__main__":'), "command"),
    Technique("FlexAttention: attention masks as code",
              ("create_block_mask(", "torch.compile(flex_attention)", "attn_mask="), "process",
              expect="equal to SDPA"),  # a process: Dynamo imports the mask_mod's module
)
BY_HEADING = {t.heading: t for t in TECHNIQUES}
SLOW = {"torch.compile",  # exec sections that start a compiler
        "Compile in practice: regional compilation and recompile logs"}


@dataclass(frozen=True)
class Block:
    """One fenced code block of RECIPES.md."""

    lang: str  # "python" or "bash"
    code: str

    @property
    def filename(self) -> str | None:
        """The file a ``# file: NAME`` first line asks for, else None."""
        m = re.match(r"# file: (\S+)\n", self.code)
        return m.group(1) if m else None


def parse(text: str) -> dict[str, list[Block]]:
    """Map each ``## `` heading of ``text`` to its fenced code blocks, in order.

    Raises:
        ValueError: a block in another language than python or bash, or outside any section.
    """
    sections: dict[str, list[Block]] = {}
    heading = None
    for part in re.split(r"^(## .*)$", text, flags=re.M):
        if part.startswith("## "):
            heading = part[3:].strip()
            sections[heading] = []
            continue
        for lang, code in re.findall(r"^```(\w*)\n(.*?)^```", part, flags=re.M | re.S):
            if lang not in ("python", "bash"):
                raise ValueError(f"RECIPES.md: a ```{lang} block; only python and bash run here")
            if heading is None:
                raise ValueError("RECIPES.md: a code block before the first ## heading")
            sections[heading].append(Block(lang, code))
    return sections


SECTIONS = parse(DOC.read_text(encoding="utf-8"))
#: Each section's whole text (prose and code), by heading.
BODIES = dict(zip(*[iter(re.split(r"^## (.*)$", DOC.read_text(encoding="utf-8"), flags=re.M)[1:])] * 2))


def _code(heading: str) -> str:
    return "\n".join(b.code for b in SECTIONS[heading] if b.lang == "python")


def _env() -> dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONHASHSEED="0")
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "XLA_FLAGS"):
        env.pop(k, None)
    return env


def _run(argv: list[str], cwd: Path) -> str:
    """Run argv in cwd (its own process group, killed whole on timeout); return its stdout.

    Raises:
        AssertionError: a non-zero exit or a timeout, with the output's tail.
    """
    proc = subprocess.Popen(argv, cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{argv} ran over {TIMEOUT_S} s:\n{out[-2000:]}\n{err[-3000:]}") from None
    assert proc.returncode == 0, f"{argv} failed ({proc.returncode}):\n{out[-2000:]}\n{err[-3000:]}"
    return out


def _command(line: str) -> list[str]:
    """Turn a command line of a bash block into argv for this venv's Python.

    Raises:
        ValueError: a command other than ``torchrun`` or ``python``.
    """
    words = shlex.split(line)
    if words[0] == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", *words[1:]]
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    raise ValueError(f"RECIPES.md: {line!r}: only torchrun and python commands run here")


def _exec(code: str, where: Path) -> dict:
    """Execute code in a fresh namespace with ``where`` as the working folder; return it."""
    import torch

    torch.manual_seed(0)
    ns: dict = {"__name__": "__recipe__"}
    cwd = Path.cwd()
    os.chdir(where)
    try:
        exec(compile(code, str(DOC), "exec"), ns)  # noqa: S102 - the recipe is the test subject
    finally:
        os.chdir(cwd)
    return ns


# --- what the document must hold --------------------------------------------------------------

def test_recipes_cover_the_course():
    with_code = {h for h, blocks in SECTIONS.items() if blocks}
    missing = [t.heading for t in TECHNIQUES if t.heading not in SECTIONS]
    assert not missing, f"RECIPES.md lost these recipes: {missing}"
    untested = sorted(with_code - set(BY_HEADING))
    assert not untested, f"sections with code but no row in TECHNIQUES (nothing runs them): {untested}"
    for t in TECHNIQUES:
        code = "\n".join(b.code for b in SECTIONS[t.heading]) + BODIES[t.heading]
        lost = [tok for tok in t.tokens if tok not in code]
        assert not lost, f"{t.heading!r}: its code no longer shows {lost}"
        assert any(b.lang == "python" for b in SECTIONS[t.heading]), t.heading


def test_parse_finds_blocks_and_rejects_other_languages():
    text = "# T\n## A\ntext\n```python\nx = 1\n```\n```bash\npython a.py\n```\n## B\nno code\n"
    assert parse(text) == {"A": [Block("python", "x = 1\n"), Block("bash", "python a.py\n")], "B": []}
    with pytest.raises(ValueError, match="only python and bash"):
        parse("## A\n```sh\nls\n```\n")
    assert Block("python", "# file: a.py\nimport os\n").filename == "a.py"


def test_each_recipe_links_an_existing_notebook():
    for t in TECHNIQUES:
        links = re.findall(r"\]\(\.\./(notebooks/\d\d_\w+\.ipynb)\)", BODIES[t.heading])
        assert links, f"{t.heading!r} links no notebook"
        for link in links:
            assert (ROOT / link).is_file(), f"{t.heading!r} links {link}, which does not exist"


def test_clipping_comes_after_unscale():
    code = _code("Mixed precision in PyTorch: autocast + GradScaler, with gradient clipping")
    assert code.index("scaler.unscale_(opt)") < code.index("clip_grad_norm_("), (
        "clip_grad_norm_ before scaler.unscale_ clips gradients that still carry the loss scale")


def test_commands_are_the_ones_shown():
    assert _command("torchrun --standalone --nproc-per-node 2 x.py")[1:4] == [
        "-m", "torch.distributed.run", "--standalone"]
    with pytest.raises(ValueError, match="only torchrun and python"):
        _command("sudo rm -rf /")


# --- the torch recipes, in this process -------------------------------------------------------

EXEC = [pytest.param(t.heading, marks=[pytest.mark.slow] if t.heading in SLOW else [])
        for t in TECHNIQUES if t.how == "exec"]


@pytest.mark.parametrize("heading", EXEC)
def test_torch_recipe_runs(heading, tmp_path):
    namespaces = [_exec(b.code, tmp_path) for b in SECTIONS[heading] if b.lang == "python"]
    assert namespaces, heading
    if heading == "Choose the device":
        assert namespaces[0]["model"](namespaces[0]["x"]).shape == (4, 2)
    if heading == "Time GPU and CPU work correctly":
        m, seconds = namespaces[0]["m"], namespaces[1]["seconds"]
        assert m.median > 0 and len(m.times) >= 1 and 0 < seconds < 1.0, (m, seconds)
    if heading == "Debug a distributed job":
        assert not __import__("torch").distributed.is_initialized()  # the recipe tears down
    if heading.startswith("Mixed precision in PyTorch"):
        ns = namespaces[0]
        assert ns["amp_dtype"] == __import__("torch").bfloat16  # a CPU: bf16, no scaler
        assert not ns["scaler"].is_enabled() and math.isfinite(ns["grad_norm"].item())


def _amp_variant(edit: str | None) -> dict:
    """The autocast recipe forced onto its fp16 + GradScaler path (the CPU has both), with
    ``edit`` (a line) removed."""
    code = _code("Mixed precision in PyTorch: autocast + GradScaler, with gradient clipping")
    assert "use_fp16 = not bf16_ok\n" in code
    code = code.replace("use_fp16 = not bf16_ok\n", "use_fp16 = True\n")
    if edit is not None:
        assert edit in code
        code = code.replace(edit, "")
    return _exec(code, Path.cwd())


def test_fp16_path_clips_unscaled_gradients():
    ns = _amp_variant(None)
    assert ns["scaler"].is_enabled() and ns["amp_dtype"] == __import__("torch").float16
    norm = ns["grad_norm"].item()
    # the true gradient norm of this model is about 1 (the bf16 path prints ~0.9)
    assert math.isfinite(norm) and norm < 10, f"clipped a gradient of norm {norm}: still scaled?"
    # the test can fail: without unscale_ the norm clip_grad_norm_ sees carries the scale
    wrong = _amp_variant("    scaler.unscale_(opt)  # the gradients back to their true size first ...\n")
    assert wrong["grad_norm"].item() > 100 * norm, wrong["grad_norm"]


# --- the recipes that need a process of their own ---------------------------------------------

PROCESS = [t for t in TECHNIQUES if t.how == "process"]
# TensorFlow's recipes share one process, in the order a learner's program has them: device
# settings first (they must precede TensorFlow's initialisation), then Keras; each block still
# runs in fresh globals (runpy). One TensorFlow start instead of two.
TF_GROUP = ("TensorFlow: memory growth, before anything else",
            "Mixed precision in Keras: a global dtype policy")
RUNPY = "import runpy, sys\nfor path in sys.argv[1:]:\n    runpy.run_path(path, run_name='__main__')\n"


def _run_in_one_process(headings: tuple[str, ...], folder: Path) -> str:
    """Run the python blocks of ``headings`` in order in one fresh process, each in fresh globals."""
    paths = []
    for h in headings:
        for b in (b for b in SECTIONS[h] if b.lang == "python"):
            paths.append(folder / f"block{len(paths)}.py")
            paths[-1].write_text(b.code, encoding="utf-8")
    assert paths, headings
    return _run([sys.executable, "-c", RUNPY, *map(str, paths)], folder)


@pytest.mark.slow
@pytest.mark.parametrize("group", [TF_GROUP] + [(t.heading,) for t in PROCESS if t.heading not in TF_GROUP],
                         ids=lambda g: g[0].split(":")[0])
def test_recipe_runs_in_a_fresh_process(group, tmp_path):
    out = _run_in_one_process(group, tmp_path)
    for heading in group:
        assert BY_HEADING[heading].how == "process", heading
        assert BY_HEADING[heading].expect in out, (heading, out[-2000:])


def test_every_process_recipe_is_run():
    grouped = set(TF_GROUP) | {t.heading for t in PROCESS if t.heading not in TF_GROUP}
    assert grouped == {t.heading for t in PROCESS}


def _run_section(heading: str, folder: Path) -> str:
    """Write the section's ``# file:`` blocks into folder, run its commands there, then its other
    python blocks, each in a fresh process; return everything printed."""
    blocks = SECTIONS[heading]
    for b in blocks:
        if b.lang == "python" and b.filename:
            (folder / b.filename).write_text(b.code, encoding="utf-8")
    out = ""
    for b in blocks:
        if b.lang == "bash":
            for line in filter(None, (ln.strip() for ln in b.code.splitlines())):
                out += _run(_command(line), folder)
    for i, b in enumerate(bl for bl in blocks if bl.lang == "python" and not bl.filename):
        script = folder / f"{heading[:8].replace(' ', '_')}_{i}.py"
        script.write_text(b.code, encoding="utf-8")
        out += _run([sys.executable, str(script)], folder)
    return out


@pytest.mark.slow
def test_ddp_script_with_torchrun(tmp_path):
    out = _run_section("DDP: the script and the torchrun command", tmp_path)
    assert "epoch 2: loss" in out and out.count("epoch 0:") == 1, out  # rank 0 prints alone
    assert (tmp_path / "ddp_model.pt").is_file()


@pytest.mark.slow
def test_fsdp2_saves_and_one_process_resumes(tmp_path):
    out = _run_section("FSDP2: fully_shard", tmp_path)
    assert "saved checkpoint" in out, out
    assert (tmp_path / "checkpoint" / ".metadata").is_file() and (tmp_path / "model_full.pt").is_file()
    shards = sorted(p.name for p in (tmp_path / "checkpoint").glob("*.distcp"))
    assert len(shards) == 2, f"one shard file per rank expected: {shards}"
    # the resume recipe loads the 2 ranks' shards into one process and compares with the
    # consolidated copy (its own assert_close), optimizer state included
    out = _run_section("Resume from torch.distributed.checkpoint", tmp_path)
    assert "resumed" in out, out


@pytest.mark.slow
def test_dataloader_workers_with_spawn(tmp_path):
    """The loader recipe with the spawn start method of macOS and Windows forced (its comments
    promise that it works there; spawn is the strict case: the workers import the file afresh,
    so a Dataset that is not at its top level, or a loop without the main guard, fails)."""
    heading = "DataLoader workers"
    (block,) = [b for b in SECTIONS[heading] if b.filename == "loader.py"]
    (command,) = [b.code.strip() for b in SECTIONS[heading] if b.lang == "bash"]
    assert command == "python loader.py" and "num_workers=2," in block.code
    (tmp_path / "loader.py").write_text(block.code.replace(
        "num_workers=2,", 'num_workers=2, multiprocessing_context="spawn",'), encoding="utf-8")
    out = _run(_command(command), tmp_path)
    assert "epoch 1: 256 samples" in out, out
