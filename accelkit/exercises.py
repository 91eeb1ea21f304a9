"""The answer keys of the notebooks' exercises and the one checker they all call.

Owns: every notebook's **Exercises** answer key (:data:`KEYS`, plain data: the expected answer,
how an answer is compared with it, a hint) and :func:`check`, the only exercise checker::

    ak.exercises.check("02.3", 256 * 64 * 8 * 8 * 2)   # prints "✓ 02.3 correct", returns True

An exercise is named ``"NN.k"``: notebook ``NN``, exercise ``k`` of its Exercises list.
Answers that depend on the machine (notebook 00's roofline) are marked ``measured``: the
notebook registers them with :func:`expect` before the learner checks them.

Lives elsewhere: the formulas the answers come from (``dist``, ``memory``, ``precision``,
``roofline``, ``data``; 03's byte counts are written out in the test).
``tests/test_exercises.py`` recomputes every key independently of this table (from those
formulas, or ``torch.finfo``), so a key that drifts from its formula fails there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Key:
    """One exercise's answer key.

    Attributes:
        answer: the expected answer (unused when ``measured`` or ``judge`` is set).
        hint: printed with a wrong or missing answer.
        rel: relative tolerance for a numeric answer, of the expected value: right when
            ``abs(answer - expected) <= rel * abs(expected)``; ``None``: the answer must equal
            the key (``answer == expected``).
        measured: the expected answer is measured on this machine and registered by the
            notebook with :func:`expect`.
        judge: for answers that are functions: ``judge(answer)`` returns whether it is right.
    """

    answer: Any
    hint: str
    rel: float | None = None
    measured: bool = False
    judge: Callable[[Any], bool] | None = None


def _pads_to_size(pad_batch: Any) -> bool:
    """Notebook 05, exercise 3: ``pad_batch(x, y, 8)`` pads 3 rows to 8 with weights 1, 1, 1, 0..."""
    import tensorflow as tf  # only this key needs TensorFlow (notebook 05 requires it)

    x, y, w = pad_batch(tf.ones((3, 64)), tf.zeros((3,), tf.int64), 8)
    return x.shape == (8, 64) and y.shape == (8,) and float(tf.reduce_sum(w)) == 3.0


#: Every exercise's key, by name ``"NN.k"``.  Hands-on exercises (no single answer) have none.
KEYS: dict[str, Key] = {
    # 00 device setup
    "00.1": Key(1 / 12, "1 FLOP per element; bytes: read x and y, write z, 4 bytes each", rel=0.02),
    "00.2": Key(None, "intensity = 2*64**3 / (3 * 64**2 * 2) FLOP/B; then roof.attainable_tflops(...)",
                rel=0.02, measured=True),
    "00.3": Key("synced", "which one waits for the device to finish?"),
    # 01 data vs model parallelism (numbers within 2 %)
    "01.1": Key((4 - 1) / (12 + 4 - 1), "the bubble formula of the pipeline section, for p stages "
                "and m micro-batches", rel=0.02),
    "01.2": Key(2 * (8 - 1) / 8 * 2e9 / 200e9, "the ring all-reduce cost model above, "
                "without the latency", rel=0.02),
    "01.3": Key((4 + 4 / 8 + 8 / 8) * 3e9 / 2**30, "the memory model above (ak.memory.per_device): "
                "ZeRO-2 shards gradients and optimizer states, not the weights", rel=0.02),
    # 02 mixed precision (exact answers)
    "02.1": Key({"fp32", "tf32", "bf16"}, "compare 1e-6 with each format's smallest normal"),
    "02.2": Key(2**18, "smallest normal / 3e-10, rounded up to a power of two"),
    "02.3": Key(256 * 64 * 8 * 8 * 2, "elements x bytes per element"),
    # 03 operator fusion (numbers to 1e-9)
    "03.1": Key(5.0, "eager: k kernels of 1 read + 1 write; fused: 1 read + 1 write", rel=1e-9),
    "03.2": Key(3, "read x, read r, write out (bias is tiny)", rel=1e-9),
    "03.3": Key(4000, "compile time / time saved per call", rel=1e-9),
    # 04 distributed data parallel (numbers within 2 %)
    "04.1": Key(0.05 * 8, "SGD's linear rule (Goyal 2017): lr grows with the global batch", rel=0.02),
    "04.2": Key(3400 / (4 * 1000), "measured throughput / the ideal (N x one process)",
                rel=0.02),
    "04.3": Key((1347 // 2 // 32) // 2, "drop_last drops a remainder twice: when the sampler "
                "splits the samples per rank and when the loader batches them", rel=0.02),
    # 05 TPU (exact answers)
    "05.1": Key(8 * 128, "the global batch is the per-replica batch times the replicas"),
    "05.2": Key(2, "one compilation per batch shape: is the last batch of the training set full?"),
    "05.3": Key(None, "pad x and y with zeros to `size` rows; weight 1.0 for real rows, 0.0 for "
                "padding", judge=_pads_to_size),
    # 06 capstone GPT (numbers within 2 %)
    "06.1": Key(6 * 85_000_000 + 12 * 12 * 768 * 1024, "6 N + 12 L d T (PaLM, appendix B): "
                "ak.gpt.flops_per_token", rel=0.02),
    "06.2": Key(8 * 100, "without no_sync every micro-batch's backward all-reduces", rel=0.02),
    "06.3": Key(6 * (48 - 2), "a checkpointed block keeps only its input; the rest is "
                "recomputed in the backward", rel=0.02),
}

_NAME = re.compile(r"\d\d\.\d+")
_measured: dict[str, Any] = {}


def _key(name: str) -> Key:
    """Return the key of exercise ``name``, or raise a ValueError naming the ones that exist."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"an exercise is named 'NN.k' (notebook NN, exercise k), e.g. '02.3'; "
                         f"got {name!r}")
    if name not in KEYS:
        same = [n for n in KEYS if n[:2] == name[:2]]
        raise ValueError(f"exercise {name} has no answer key; notebook {name[:2]} has "
                         f"{', '.join(same) or 'none'} (hands-on exercises are not checked)")
    return KEYS[name]


def expect(name: str, value: Any) -> None:
    """Register the expected answer of a ``measured`` exercise (measured on this machine).

    Args:
        name: the exercise, ``"NN.k"``; its key must be ``measured``.
        value: the answer this machine's measurements give.

    Raises:
        ValueError: for an unknown exercise, one whose key is fixed data, or ``value=None``.

    Example: ``ak.exercises.expect("00.2", roof.attainable_tflops(64 / 3, "bf16"))``
    """
    if not _key(name).measured:
        raise ValueError(f"exercise {name}'s answer is fixed (ak.exercises.KEYS), not measured")
    if value is None:
        raise ValueError(f"expect({name!r}, None): the measured answer is missing")
    _measured[name] = value


def _expected(name: str, key: Key) -> Any:
    if not key.measured:
        return key.answer
    if name not in _measured:
        raise ValueError(f"exercise {name}'s answer is measured on this machine: run the cell that "
                         f"calls ak.exercises.expect({name!r}, ...) first")
    return _measured[name]


def _compare(name: str, key: Key, answer: Any) -> tuple[bool, str]:
    """Return ``(right, why)``: ``why`` says what was wrong beyond the hint ("" if nothing)."""
    if key.judge is not None:
        try:
            return bool(key.judge(answer)), ""
        except Exception as e:  # the learner's function failed: show why, with the hint
            return False, f" (calling it raised {type(e).__name__}: {e})"
    expected = _expected(name, key)
    if key.rel is None:
        try:
            return bool(answer == expected), ""
        except (TypeError, ValueError):  # e.g. an array: == gives no single truth value
            return False, f" (expected a {type(expected).__name__}, got {type(answer).__name__})"
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return False, f" (expected a number, got {type(answer).__name__})"
    return abs(value - float(expected)) <= key.rel * abs(float(expected)), ""


def check(name: str, answer: Any) -> bool:
    """Check an exercise answer; print whether it is right, with a hint when it is not.

    A wrong or missing answer raises nothing (the learner should see the hint); it returns
    ``False``.

    Args:
        name: the exercise, ``"NN.k"`` (notebook NN, exercise k), e.g. ``"02.3"``.
        answer: the learner's answer: a number (compared within the key's relative tolerance),
            a string or set (compared with ``==``), or a function (called by the key's judge);
            ``None`` means "not answered yet".

    Returns:
        True when the answer is right.  Prints one line: ``"✓ 02.3 correct"``, or
        ``"✗ 02.3 not yet. Hint: ..."``, or ``"… 02.3 not answered yet. Hint: ..."``.

    Raises:
        ValueError: for a name without an answer key, or a ``measured`` exercise whose value the
            notebook has not registered with :func:`expect`.
    """
    key = _key(name)
    if answer is None:
        print(f"… {name} not answered yet. Hint: {key.hint}")
        return False
    right, why = _compare(name, key, answer)
    print(f"✓ {name} correct" if right else f"✗ {name} not yet{why}. Hint: {key.hint}")
    return right
