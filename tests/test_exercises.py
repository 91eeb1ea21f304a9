"""ak.exercises: every answer key, recomputed from the formulas the notebooks teach."""

import json
import math
import re
from pathlib import Path

import pytest
import torch

import accelkit as ak
from accelkit import exercises

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _right_answers() -> dict:
    """The right answer of every keyed exercise, from the package's formulas (not the keys)."""
    zero2 = ak.memory.per_device(3_000_000_000, "zero2", 8, optimizer="adam")
    # smallest normal of each format (tf32 has fp32's 8-bit exponent, so fp32's range)
    tiny = {"fp32": torch.finfo(torch.float32).tiny, "tf32": torch.finfo(torch.float32).tiny,
            "fp16": torch.finfo(torch.float16).tiny, "bf16": torch.finfo(torch.bfloat16).tiny}
    return {
        "00.1": 1 / (3 * 4),  # 1 FLOP per 3 x 4 bytes
        "00.2": 1.25,  # measured: registered with expect() in the test
        "00.3": "synced",
        "01.1": (4 - 1) / (12 + 4 - 1),
        "01.2": 2 * (8 - 1) / 8 * 2e9 / 200e9,  # Patarasuk & Yuan: 2 (N-1)/N bytes / bus bandwidth
        "01.3": (zero2.params_bytes + zero2.grads_bytes + zero2.optimizer_bytes) / 2**30,
        "02.1": {name for name, t in tiny.items() if t <= 1e-6},
        "02.2": 2 ** math.ceil(math.log2(tiny["fp16"] / 3e-10)),
        "02.3": 256 * 64 * 8 * 8 * torch.finfo(torch.bfloat16).bits // 8,
        "03.1": (5 * (1 + 1)) / (1 + 1),  # 5 kernels of 1 read + 1 write, fused: 1 read + 1 write
        "03.2": 3,
        "03.3": math.ceil(20.0 / (0.010 - 0.005)),  # compile time / time saved per call
        "04.1": 0.05 * 8,
        "04.2": 3400 / (4 * 1000),
        "04.3": (1347 // 2 // 32) // 2,
        "05.1": 8 * 128,
        "05.2": 1 + (len(ak.data.digits().y_train) % 100 != 0),
        "06.1": ak.gpt.flops_per_token(ak.gpt.GPTConfig(n_layer=12, n_head=12, n_embd=768,
                                                        block_size=1024), 85_000_000),
        "06.2": 100 * 8,  # k all-reduce rounds per step without no_sync
        "06.3": 6 * (48 - 2),  # per checkpointed block: its activations minus its kept input
    }


def _wrong(right):
    """A wrong answer of the same kind: a number off by 5 %, another string or set."""
    if isinstance(right, set):
        return right | {"fp16"}
    if isinstance(right, str):
        return "naive"
    return right * 1.05 + 1 if isinstance(right, int) else right * 1.05


RIGHT = _right_answers()
VALUED = sorted(n for n, k in exercises.KEYS.items() if k.judge is None)


@pytest.fixture(autouse=True)
def _measured_roof(monkeypatch):
    monkeypatch.setattr(exercises, "_measured", {"00.2": RIGHT["00.2"]})


def test_every_valued_key_has_a_recomputed_answer():
    assert sorted(RIGHT) == VALUED


@pytest.mark.parametrize("name", VALUED)
def test_the_right_answer_passes_and_a_wrong_one_fails(name, capsys):
    assert exercises.check(name, RIGHT[name]) is True
    assert capsys.readouterr().out == f"✓ {name} correct\n"
    assert exercises.check(name, _wrong(RIGHT[name])) is False
    assert capsys.readouterr().out.startswith(f"✗ {name} not yet. Hint: ")
    assert exercises.check(name, None) is False
    assert capsys.readouterr().out.startswith(f"… {name} not answered yet. Hint: ")


@pytest.mark.parametrize("name", [n for n in VALUED if exercises.KEYS[n].rel == 0.02])
def test_numbers_count_as_right_within_two_percent(name):
    assert exercises.check(name, RIGHT[name] * 1.019)
    assert exercises.check(name, RIGHT[name] * 0.981)
    assert not exercises.check(name, RIGHT[name] * 1.03)


def test_verdicts_of_the_old_checkers_are_kept(capsys):
    assert exercises.check("00.1", "0.0833")  # 00 compared float(answer)
    assert exercises.check("02.2", 262144.0) and not exercises.check("02.2", 262144.5)  # 02: ==
    assert not exercises.check("02.1", ["fp32", "tf32", "bf16"])  # a set, as 02 asked
    assert exercises.check("03.3", 4000.0) and not exercises.check("03.3", 3999)
    assert not exercises.check("01.1", "a fifth")  # 01 raised TypeError here
    assert "expected a number, got str" in capsys.readouterr().out


def test_a_measured_answer_needs_its_value(monkeypatch):
    monkeypatch.setattr(exercises, "_measured", {})
    with pytest.raises(ValueError, match=r"expect\('00.2'"):
        exercises.check("00.2", 1.25)
    exercises.expect("00.2", 2.0)
    assert exercises.check("00.2", 2.0) and not exercises.check("00.2", 1.25)
    with pytest.raises(ValueError, match="fixed"):
        exercises.expect("00.1", 0.1)
    with pytest.raises(ValueError, match="missing"):
        exercises.expect("00.2", None)


@pytest.mark.parametrize("name", ["2.3", "02", 2, "07.1", "01.4"])
def test_unknown_names_are_value_errors(name):
    with pytest.raises(ValueError):
        exercises.check(name, 1)


def test_pad_batch_is_judged_by_calling_it(capsys):
    tf = pytest.importorskip("tensorflow")

    def pad_batch(x, y, size):
        n = size - x.shape[0]
        w = tf.concat([tf.ones(x.shape[0]), tf.zeros(n)], 0)
        return tf.pad(x, [[0, n], [0, 0]]), tf.pad(y, [[0, n]]), w

    assert exercises.check("05.3", pad_batch)
    assert not exercises.check("05.3", lambda x, y, size: (x, y, tf.ones(x.shape[0])))
    assert not exercises.check("05.3", 8)
    assert "raised TypeError" in capsys.readouterr().out


def test_the_notebooks_call_the_checker_with_names_that_have_keys():
    for nn in sorted({name[:2] for name in exercises.KEYS}):
        (path,) = NOTEBOOKS.glob(f"{nn}_*.ipynb")
        sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
        assert not any(re.search(r"def check(_exercise)?\(", s) for s in sources), path.name
        assert any("ak.exercises.check(" in s for s in sources), path.name
        for src in (s for s in sources if "ak.exercises." in s):
            for name in re.findall(r"""["'](\d\d\.\d+)["']""", src):
                assert name.startswith(nn) and name in exercises.KEYS, (path.name, name)
