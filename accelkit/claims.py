"""Speedup claims, the asserts that check them, and the dtype names the course reads.

A claim names a comparison a notebook times (``"bf16_matmul"``) and, per kind of hardware, the
floor the candidate's speedup must reach there (the lower end of the interval of interleaved
pairs, :func:`accelkit.bench.compare`) with why it holds, or ``None``: no claim, the notebook
shows the measurement.  Floors must hold in every mode of their class and are re-derived from
many runs' margins (``tools/claim_margins.py``).  The floors, reasons and measurements are
data (``claims.toml``); GPU floors follow each class's datasheet peaks (:func:`for_gpu`).
:func:`assert_speedup` and :func:`assert_close` raise ``AssertionError`` with what was expected
and found; each decided claim is appended as a JSON line to ``$ACCELKIT_CLAIMS_LOG`` if set.
The dtype-name table (:func:`canonical`, :func:`short`) lives here, below hardware.
Elsewhere: the classes carrying the floors (:mod:`accelkit.hardware`), deciding from an
interval (:func:`accelkit.stats.decide`).
"""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class Claim:
    """A speedup claim on one hardware class: the candidate is at least ``floor`` times faster
    (``None``: no claim here), and ``why`` (a measurement, or the hardware fact)."""

    floor: float | None
    why: str


#: Every speedup claim the notebooks assert, with what it compares.
CLAIMS: dict[str, str] = {
    "bf16_matmul": "bf16 vs fp32 matmul (00, 02)",
    "amp_step_torch": "PyTorch autocast training step vs fp32 (02)",
    "amp_step_tf": "Keras mixed-precision training step vs float32 (02)",
    "pinned_copy": "pinned + non_blocking host-to-device copy vs pageable (00)",
    "compile_chain": "torch.compile of a bias-ReLU-scale chain vs eager (03)",
    "compile_gelu": "torch.compile of a bias-GELU-scale chain vs eager (03)",
    "conv_bn_fold": "Conv+BN folded vs unfused, inference (03)",
    "fused_adamw": "fused AdamW vs for-loop AdamW (03)",
    "foreach_adamw": "foreach AdamW vs for-loop AdamW (03)",
    "xla_poly": "XLA jit_compile vs tf.function, arithmetic chain (03)",
    "xla_relu": "XLA jit_compile vs tf.function, ReLU chain (03)",
    "steps_per_execution": "Keras steps_per_execution=N vs 1 (05)",
    "tf32_matmul": "fp32 matmul computed as TF32 vs IEEE fp32 (02)",
    "compile_chain_prealloc": "torch.compile of the bias-ReLU-scale chain vs eager doing the "
                              "same work (intermediates preallocated) (03)",
    "compile_gemm": "torch.compile of a GEMM-bound Linear+GELU block vs eager: about 1x (03)",
    "gpt_sdpa": "GPT training step, scaled_dot_product_attention vs hand-written attention (06)",
    "gpt_amp": "GPT training step, autocast (the class's dtype) vs fp32 (06)",
    "gpt_compile": "GPT training step, torch.compile vs eager (06)",
    "gpt_fused_adamw": "GPT training step, fused AdamW vs for-loop AdamW (06)",
    "threads_step": "fp32 CNN training step on all intra-op threads vs one (02)",
    "channels_last_step": "fp32 CNN training step, channels-last (NHWC) vs NCHW (02)",
    "batch_throughput": "fp32 CNN training, one step of batch B vs 16 steps of batch B/16 "
                        "(same samples) (02)",
}

#: The claims' floors and reasons, with the measurements behind them: data, not code.
DATA_FILE = Path(__file__).with_name("claims.toml")


def _load(path: Path = DATA_FILE) -> dict[str, Any]:
    """Read the claims file; ``{name}`` in a reason becomes the ``[text]`` entry ``name``."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    text: dict[str, str] = data.pop("text")
    for _ in range(3):  # entries may name other entries (disagree -> xeon_vm_bf16)
        text = {k: v.format_map(text) for k, v in text.items()}

    def claims(table: Mapping[str, Any]) -> dict[str, Claim]:
        return {k: Claim(None if math.isnan(v["floor"]) else v["floor"], v["why"].format_map(text))
                for k, v in table.items()}

    out: dict[str, Any] = {"text": text, "remeasured": data.pop("remeasured")}
    for name, table in data.items():
        nested = all("floor" not in v for v in table.values())
        out[name] = {k: claims(v) for k, v in table.items()} if nested else claims(table)
    return out


_DATA = _load()
_TEXT: dict[str, str] = _DATA["text"]
_CPU_CLAIMS: dict[str, Claim] = _DATA["cpu"]
_NO_BF16_CPU: dict[str, Claim] = _DATA["cpu_no_bf16"]
_GPU_CLAIMS: dict[str, Claim] = _DATA["gpu"]
_NO_TENSOR_CORES: dict[str, Claim] = _DATA["gpu_no_tensor_cores"]
_NO_TRITON = Claim(None, _TEXT["no_triton"])
_CPU_BF16_CLAIMS: dict[str, dict[str, Claim]] = _DATA["cpu_bf16"]
_GPT_CPU_CLAIMS: dict[str, Claim] = _DATA["gpt_cpu"]
_GPT_CPU_BF16: dict[str, dict[str, Claim]] = _DATA["gpt_cpu_bf16"]
_GPT_GPU_CLAIMS: dict[str, Claim] = _DATA["gpt_gpu"]
_H200_BF16_MATMUL = _TEXT["h200_bf16_matmul"]
_DISAGREE = _TEXT["disagree"]
#: The bf16 matmul on the two CPUs of ``cpu-avx512-bf16`` (measurements: claims.toml).
XEON_VM_BF16 = _TEXT["xeon_vm_bf16"]
ZEN4_BF16 = _TEXT["zen4_bf16"]
#: CPU classes whose CPUs disagree on bf16: the bf16 claims (:data:`BF16_CLAIMS`) are decided
#: on the learner's machine by :func:`accelkit.precision.amp_path`, never by the class.
MEASURED_BF16_CLASSES = ("cpu-avx512-bf16",)
#: The claims that follow the bf16 (autocast dtype) matmul's speed.
BF16_CLAIMS = ("bf16_matmul", "amp_step_torch", "amp_step_tf", "gpt_amp")


def _ratio(peaks: Mapping[str, float] | None, fast: str, slow: str = "fp32") -> float | None:
    """Return ``peaks[fast] / peaks[slow]`` (the datasheet's speed ratio), or None if unknown."""
    if not peaks or fast not in peaks or slow not in peaks:
        return None
    return peaks[fast] / peaks[slow]


def _tc_claims(peaks: Mapping[str, float] | None, *, bf16: bool) -> dict[str, Claim]:
    """Return the tensor-core claims of a GPU with bf16 (or only fp16) tensor cores, each
    quoting this class's datasheet 16-bit/fp32 ratio (16x A100, 4x A10/L4, 2x RTX 4090); under
    3x the floors 2.0 (matmul) and 1.5 (GPT step) drop to 1.2."""
    dt = "bf16" if bf16 else "fp16"
    ratio = _ratio(peaks, dt)
    if ratio is None:
        sheet = (f"{dt} tensor cores; this GPU's datasheet is not in accelkit's table, so its "
                 f"{dt}/fp32 ratio is not known here (2x on a GeForce RTX 4090, 4x on an A10 or "
                 "L4, 16x on an A100: the floor holds at the lowest)")
        big = False
    else:
        sheet = f"{dt} tensor cores: {ratio:.3g}x the fp32 peak on this class's datasheet (dense)"
        big = ratio >= 3
    low = "" if big else "; under 3x on the datasheet, so a floor of 1.2"
    if not bf16:
        return {
            "bf16_matmul": Claim(None, "no bf16 tensor cores before Ampere: bf16 is emulated, "
                                 "use fp16"),
            "amp_step_torch": Claim(1.2, sheet),
            "amp_step_tf": Claim(1.0, "mixed_float16 on tensor cores is not slower"),
            "gpt_amp": Claim(1.5 if big else 1.2, sheet + "; the step's memory-bound parts gain "
                             "~2x from half the bytes" + low),
        }
    return {
        "bf16_matmul": Claim(2.0 if big else 1.2, sheet + "; " + _H200_BF16_MATMUL + low),
        "amp_step_torch": Claim(1.2, "a 512-channel CNN is tensor-core bound: 1.8x measured on "
                                "an H200; " + sheet),
        "amp_step_tf": Claim(1.0, "mixed precision on tensor cores is not slower"),
        "gpt_amp": Claim(1.5 if big else 1.2, sheet + "; the step's memory-bound parts gain ~2x "
                         "from half the bytes" + low),
    }


def _tf32_claims(peaks: Mapping[str, float] | None) -> dict[str, Claim]:
    """Return the TF32 claim (NVIDIA only) from the datasheet's tf32/fp32 ratio: floor 1.3 from
    1.9x (2x A10/L4, 8x A100); none below (1x RTX 4090, 1.7x H20) or when unknown."""
    ratio = _ratio(peaks, "tf32")
    if ratio is None:
        return {"tf32_matmul": Claim(None, "TF32 tensor cores (sm_80+), but this GPU's datasheet "
                                     "is not in accelkit's table: the gain is not known here")}
    sheet = f"TF32 tensor cores: {ratio:.3g}x the IEEE fp32 peak on this class's datasheet"
    if ratio < 1.9:
        return {"tf32_matmul": Claim(None, sheet + ": too close to fp32 for a floor")}
    return {"tf32_matmul": Claim(1.3, sheet + "; the floor leaves room for a matmul below the "
                                 "datasheet's size")}


def measured_bf16(faster: bool | None, finding: str, kernel: str = "") -> dict[str, Claim]:
    """Return ``{name: Claim}`` for :data:`BF16_CLAIMS` on a machine whose class lets a
    measurement decide (:data:`MEASURED_BF16_CLASSES`, by :func:`accelkit.precision.amp_path`).

    ``faster``: the bf16 vs fp32 matmul measured here was clearly faster (then the notebooks'
    bf16 matmul gets floor 1.0, the training steps none), not (``False``) or too noisy
    (``None``): no claim.  ``finding``: the measurement in words; ``kernel``: the oneDNN kernel.
    """
    ran = f"; oneDNN ran {kernel}" if kernel else ""
    seen = f"measured on this machine before the notebook's own timing: {finding}{ran}"
    if faster:
        step = Claim(None, f"bf16 matmuls are faster on this CPU ({seen}), but a training step "
                     "adds casts and fp32 work (loss, optimizer) and no measurement of this "
                     "class's steps backs a floor: the verdict is shown")
        return {"bf16_matmul": Claim(1.0, seen + "; " + _DISAGREE + ", so this CPU's own "
                                     "measurement decides, and the claim 'bf16 is not slower "
                                     "here' is re-checked on fresh pairs"),
                "amp_step_torch": step, "amp_step_tf": step, "gpt_amp": step}
    what = ("too noisy to say whether bf16 is faster here" if faster is None else
            "bf16 is not clearly faster here, as on the Xeon VM of this class")
    none = Claim(None, f"{seen}: {what}; " + _DISAGREE + ": no claim")
    return {name: none for name in BF16_CLAIMS}


def _remeasured(base: dict[str, Claim], *sources: tuple[dict[str, str], str]) -> dict[str, Claim]:
    """Return ``base``'s claims for the keys of the ``(measured, where)`` sources, each floor
    kept and its reason extended with every source that measured it."""
    keys = [k for k in base if any(k in measured for measured, _ in sources)]
    return {k: Claim(base[k].floor, "; ".join([base[k].why] + [
        f"{measured[k]} {where}" for measured, where in sources if k in measured]))
        for k in keys}


#: CPU classes whose fusion floors were re-measured in that class (claims.toml's [remeasured]).
_CPU_CLASS_FUSION: dict[str, dict[str, Claim]] = {
    cls: _remeasured(_CPU_CLAIMS, *[(measured, _TEXT[where]) for where, measured in tables.items()])
    for cls, tables in _DATA["remeasured"].items()}


def for_cpu(name: str) -> dict[str, Claim]:
    """Return ``{claim: Claim}`` for CPU class ``name``: the shared CPU floors, its bf16 (else
    the no-bf16-units) and GPT ones, then its own re-measured entries."""
    return (dict(_CPU_CLAIMS) | _CPU_BF16_CLAIMS.get(name, _NO_BF16_CPU) | _GPT_CPU_CLAIMS
            | _GPT_CPU_BF16.get(name, {}) | _CPU_CLASS_FUSION.get(name, {}))


def for_gpu(kind: str, cc: tuple[int, int], *, bf16: bool, tf32: bool,
            peaks: Mapping[str, float] | None = None) -> dict[str, Claim]:
    """Return ``{claim: Claim}`` for a GPU class of ``kind`` (``"cuda"``/``"rocm"``) and compute
    capability ``cc`` (below (7, 0): no tensor cores, no autocast claim), with ``bf16``/``tf32``
    tensor cores, from its dense datasheet ``peaks`` (``{"fp32": 19.5, "bf16": 312.0}``; empty
    or ``None``: not in the table)."""
    out = dict(_GPU_CLAIMS) | _GPT_GPU_CLAIMS | _tc_claims(peaks, bf16=bf16)
    if tf32 and kind == "cuda":
        out |= _tf32_claims(peaks)
    if kind == "cuda" and cc < (7, 0):
        out |= _NO_TENSOR_CORES | {name: _NO_TRITON for name in (
            "compile_chain", "compile_gelu", "compile_chain_prealloc", "compile_gemm",
            "gpt_compile")}
    return out


# ----------------------------------------------------------------------------- dtype names
#: Canonical dtype name (as torch, NumPy, TensorFlow and ml_dtypes spell it) -> the short key
#: the course prints and uses as a result key, widest first.
SHORT = {"float64": "fp64", "float32": "fp32", "tfloat32": "tf32", "float16": "fp16",
         "bfloat16": "bf16"}
#: Other spellings -> canonical name (the short keys, and the C/PyTorch type names).
ALIASES = {**{s: n for n, s in SHORT.items()}, "double": "float64", "float": "float32",
           "half": "float16"}


def canonical(dtype: Any) -> str:
    """Return the canonical name of a dtype: ``"float32"``, ``"tfloat32"``, ``"bfloat16"`` ...

    Takes a name (``"bf16"``, ``"BFloat16"``, ``"half"``), a torch dtype, or anything with a
    ``.name`` (NumPy, TensorFlow).  Returns any other name lower-cased, without ``"torch."``
    (``torch.int8`` -> ``"int8"``), for the caller to reject with its own message; never raises.
    """
    raw = str(getattr(dtype, "name", dtype)).strip().replace("torch.", "").lower()
    return ALIASES.get(raw, raw)


def short(dtype: Any) -> str:
    """Return the short key of a dtype (``"fp32"``, ``"tf32"``, ``"fp16"``, ``"bf16"``,
    ``"fp64"``); a name with none (``"int8"``) as :func:`canonical` gives it.  Never raises."""
    name = canonical(dtype)
    return SHORT.get(name, name)


# ----------------------------------------------------------------------------- asserting
CLAIMS_LOG_ENV = "ACCELKIT_CLAIMS_LOG"

# Default tolerances by canonical dtype name (:func:`canonical`): (rtol, atol).  fp32 values
# follow torch.testing's defaults; low-precision ones follow its bf16/fp16 defaults.
_TOL = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "tfloat32": (1e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-5),
    "float16": (1e-3, 1e-5),
}


def tolerance(dtype: Any) -> tuple[float, float]:
    """Return the default ``(rtol, atol)`` (``torch.testing.assert_close``'s) for ``dtype``
    (a torch/NumPy/TF dtype or a name, :func:`canonical`).

    Raises:
        ValueError: for a dtype with no default (integers compare exactly; pass tolerances).
    """
    name = canonical(dtype)
    if name not in _TOL:
        raise ValueError(f"no default tolerance for dtype {name!r}; pass rtol and atol")
    return _TOL[name]


def _to_numpy(x: Any) -> Any:
    import numpy as np

    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if str(x.dtype) in ("torch.bfloat16", "torch.float16"):
            x = x.float()
        return x.numpy()
    if hasattr(x, "numpy"):
        return np.asarray(x.numpy())
    return np.asarray(x)


def assert_close(actual: Any, expected: Any, *, rtol: float | None = None,
                 atol: float | None = None, what: str = "result") -> float:
    """Assert ``|actual - expected| <= atol + rtol*|expected|`` elementwise (same shapes;
    tolerances default to :func:`tolerance` of ``actual``'s dtype); return the max absolute
    error.  ``what`` names the result in the message.

    Raises:
        AssertionError: with the max error, where it is, and the tolerances.
    """
    import numpy as np

    if rtol is None or atol is None:
        d_rtol, d_atol = tolerance(getattr(actual, "dtype", "float32"))
        rtol = d_rtol if rtol is None else rtol
        atol = d_atol if atol is None else atol
    a, e = _to_numpy(actual).astype(np.float64), _to_numpy(expected).astype(np.float64)
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shape {a.shape} differs from expected {e.shape}")
    err = np.abs(a - e)
    bad = err > atol + rtol * np.abs(e)
    worst = float(err.max()) if err.size else 0.0
    if bad.any():
        idx = np.unravel_index(int(np.argmax(err)), err.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} values differ; max |error| {worst:.3g} at "
            f"{tuple(int(i) for i in idx)} (got {a[idx]:.6g}, expected {e[idx]:.6g}); "
            f"rtol={rtol:g}, atol={atol:g}")
    return worst


def assert_speedup(comparison: Any, *, at_least: float | None, what: str, hardware: str = "",
                   why: str = "", at_most: float | None = None) -> float:
    """Assert that a measured speedup reaches ``at_least``, deciding from its interval.

    Holds when the whole confidence interval of the per-pair speedups lies at or above the
    floor; fails "does not hold here" when it lies below, "too noisy to decide" when it
    straddles.  With ``compare(..., at_least=floor)`` up to four looks are taken, alpha spent
    across them (:class:`accelkit.stats.SequentialPlan`): a speedup exactly at the floor is
    said to hold in at most 2.5 % of runs.

    Args:
        comparison: an :class:`accelkit.bench.Comparison` (a lone number carries no noise).
        at_least: the class's floor (:meth:`accelkit.hardware.HardwareClass.floor`; 1.0: "not
            slower"); ``None``: no claim, nothing asserted.
        what, hardware, why: what was sped up, the class that chose the floor, and why it
            holds, for the message.
        at_most: also a ceiling ("compiling a GEMM-bound block gains little").

    Returns:
        The median speedup.

    Raises:
        AssertionError: when the claim is refuted or cannot be decided, with the interval,
            the number of pairs and the noise.
        TypeError: when ``comparison`` is not a Comparison.
    """
    from accelkit import bench

    if not isinstance(comparison, bench.Comparison):
        raise TypeError(f"{what}: assert_speedup takes an ak.bench.Comparison (from "
                        f"ak.bench.compare), not {type(comparison).__name__}: a lone number "
                        "carries no noise to decide from")
    if at_least is None and at_most is None:
        return comparison.speedup
    verdict = comparison.verdict(at_least=at_least, at_most=at_most)
    _log_claim(comparison, what, hardware, at_least, at_most, verdict)
    if not verdict.holds:
        on = f" on {hardware}" if hardware else ""
        claim = " and ".join(f"{word} {bound:.2f}x" for word, bound in
                             (("at least", at_least), ("at most", at_most)) if bound is not None)
        because = f" (the floor: {why})" if why else ""
        advice = ("the interval lies outside the claim: the lesson's claim is false on this "
                  "machine, and the notebook must say why" if verdict.refuted else
                  "the interval straddles the bound: re-run on an idle machine, or measure "
                  "longer")
        raise AssertionError(
            f"{what}: the claim '{claim}'{on} {verdict}: "
            f"{comparison.summary()}{because}. {advice[0].upper()}{advice[1:]}.")
    return comparison.speedup


def _log_claim(comparison: Any, what: str, hardware: str, at_least: float | None,
               at_most: float | None, verdict: str) -> None:
    """Append one decided claim to the ``$ACCELKIT_CLAIMS_LOG`` file (absolute path; folder made)
    if set; a log that cannot be written warns, never fails the claim."""
    path = os.environ.get(CLAIMS_LOG_ENV)
    if not path:
        return
    from accelkit import report

    low, high = comparison.interval
    line = {"what": what, "hardware": hardware, "notebook": os.environ.get(
        report.NOTEBOOK_ENV, ""), "at_least": at_least, "at_most": at_most,
        "speedup": comparison.speedup, "low": low, "high": high,
        "pairs": len(comparison.ratios), "noise": comparison.noise, "verdict": verdict,
        "extra_s": comparison.extra.get("extra_s"),
        "looks": len(comparison.extra.get("looks", ())) or 1, "level": comparison.level}
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
    except OSError as exc:
        warnings.warn(f"{CLAIMS_LOG_ENV}={path}: claim not logged ({exc})", stacklevel=3)


__all__ = ["ALIASES", "BF16_CLAIMS", "CLAIMS", "CLAIMS_LOG_ENV", "MEASURED_BF16_CLASSES", "SHORT",
           "XEON_VM_BF16", "ZEN4_BF16", "Claim", "assert_close", "assert_speedup", "canonical",
           "for_cpu", "for_gpu", "measured_bf16", "short", "tolerance"]
