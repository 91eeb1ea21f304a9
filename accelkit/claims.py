"""Speedup claims: every claim the notebooks assert, with its floor and why, per kind of hardware.

A claim names a comparison a notebook times (``"bf16_matmul"``: bf16 vs fp32 matmul) and, for
each kind of hardware, the floor the candidate's speedup must reach there (the lower end of the
interval of interleaved pairs, :func:`accelkit.bench.compare`) with the reason it holds — a
measurement or a hardware fact — or ``None``: no claim on that hardware, the notebook shows
the measurement only.  :data:`CLAIMS` lists the claims; :func:`for_cpu` and :func:`for_gpu`
assemble the floors one hardware class carries.

Elsewhere: the hardware classes that carry these floors (and ``HardwareClass.claim``) are
:mod:`accelkit.hardware`; deciding a claim from an interval is :func:`accelkit.stats.decide`.
Floors must hold in every mode of their class (this course's CI CPU switches between two bf16
speeds); they are re-derived from measurements, never from one good run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """A speedup claim's floor on one hardware class.

    Attributes:
        floor: the candidate is at least this many times faster (``None``: no claim here).
        why: why the floor holds on this class (measurement, or the hardware fact).
    """

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

_MEASURED_CPU = "measured on the course's 2-core CI CPU (a Xeon VM)"

#: Claims shared by every CPU class (memory-bound fusion and per-call overhead).
_CPU_CLAIMS: dict[str, Claim] = {
    "pinned_copy": Claim(None, "no device to copy to: CPU tensors stay where they are"),
    "compile_chain": Claim(2.5, "3 eager passes vs 1 fused pass over memory: 3x predicted, "
                           "7-8x " + _MEASURED_CPU + " (eager also allocates its intermediates)"),
    "compile_gelu": Claim(1.5, "same bytes as the ReLU chain, more arithmetic per element: "
                          "8.8x-11.3x with torch 2.11 and 2.13 on a 2-core AMD EPYC Zen 4; holds "
                          "with a SIMD-vectorized Inductor kernel, which 03 checks (a scalar "
                          "kernel served from the cache measured 0.6x of eager)"),
    "conv_bn_fold": Claim(None, "BatchNorm's two passes are a few % of this block on a CPU (03 "
                          "times them alone: a ceiling of 1.03x-1.11x on a 2-core AMD EPYC Zen "
                          "4); folded vs unfused measured 0.90x (0.63x-1.05x, 18 pairs, torch "
                          "2.11) and 1.03x (0.58x-1.25x, 14 pairs, torch 2.13) there: within the "
                          "timing noise, so no speed claim"),
    "fused_adamw": Claim(2.0, "one kernel per step instead of ~10 per parameter tensor; "
                         "5x-7.5x " + _MEASURED_CPU),
    "foreach_adamw": Claim(None, "one multi-tensor op per step and operation: 1.2x-1.8x "
                           + _MEASURED_CPU + ", a margin the 2-core machines' noise can hide: "
                           "an illustration here, measured and shown, not asserted"),
    "xla_poly": Claim(2.0, "XLA fuses 8 elementwise ops into one loop: 3x-9x " + _MEASURED_CPU),
    "xla_relu": Claim(None, "XLA's one loop writes a fresh 128 MiB output each call, and "
                      "whether that costs depends on TensorFlow's allocator: 2.06x-2.36x with "
                      "oneDNN's CPU optimisations on (2-core AMD EPYC Zen 4, TF 2.20 and 2.21), "
                      "where freed buffers are reused; with them off the fresh pages are faulted "
                      "in one by one (03 measures it): an illustration, measured and shown"),
    "steps_per_execution": Claim(1.2, "per-step Python and dispatch overhead paid once per N "
                                 "steps on a small model"),
    "compile_chain_prealloc": Claim(2.0, "3 passes over memory vs 1: 3x predicted from bytes, "
                                    "2.9x " + _MEASURED_CPU + "; the floor leaves room for noise"),
    "compile_gemm": Claim(0.6, "the GEMM (oneDNN/MKL either way) is ~97% of the block; fusing "
                          "the epilogue cannot make it much slower: 0.90x-1.05x " + _MEASURED_CPU
                          + ", an interval from 0.74x on a busy machine: the floor only rules "
                          "out a real slowdown; the lesson is the ceiling"),
    # 02's "what helps on a laptop without bf16 units" (fp32 knobs; every CPU class)
    "threads_step": Claim(None, "the right count depends on what else runs: with 2 cores shared "
                          "by other busy processes, 1 thread measured 4-5x *faster* than 2 on "
                          "the CI VM (OpenMP threads wait for each other), while a quiet "
                          "many-core laptop gains from every physical core: measure, no floor"),
    "channels_last_step": Claim(None, "this CNN's 8x8 images make its convolutions small; "
                                "NHWC vs NCHW measured 0.5x-1.7x (intervals) on the busy CI VM: "
                                "no floor holds, the verdict is shown"),
    "batch_throughput": Claim(None, "per-step costs (Python, op dispatch, the Adam update over "
                              "every parameter) are paid once per B samples instead of k times; "
                              "but the convolutions dominate this step: 8 steps of 64 vs one of "
                              "512 measured 1.22x (interval 0.98x-1.28x) " + _MEASURED_CPU
                              + " when nearly idle, 2.9x-6x under load; 02 uses 16 steps of 32: "
                              "an effect that depends on the load, so an illustration, "
                              "measured and shown, not asserted"),
}
_NO_BF16_CPU = {
    "bf16_matmul": Claim(None, "no bf16 units: bf16 is converted and computed by a slow "
                         "fallback, 5-500x slower than fp32 (pytorch/pytorch#146508)"),
    "amp_step_torch": Claim(None, "no bf16 units: autocast adds conversions to a slower matmul"),
    "amp_step_tf": Claim(None, "no bf16 units: the mixed policy adds casts to a slower matmul"),
}
_GPU_CLAIMS: dict[str, Claim] = {
    "pinned_copy": Claim(1.1, "pinned memory lets the copy engine read host memory directly; "
                         "a pageable copy is staged through a pinned buffer first: 8x on an "
                         "H200, 1.15x-2.5x in NVIDIA's bandwidthTest post (verified/quoted.toml)"),
    "compile_chain": Claim(2.0, "3 eager kernels vs 1 fused Triton kernel: 3.5x measured on "
                           "an H200"),
    "compile_gelu": Claim(1.5, "same bytes as the ReLU chain; GPUs have arithmetic to spare"),
    "conv_bn_fold": Claim(None, "one memory-bound pass saved beside the convolutions: too "
                          "small a share to promise, and not measured on a GPU by this course: "
                          "an illustration, measured and shown, not asserted"),
    "fused_adamw": Claim(2.0, "one kernel launch per step instead of thousands: 22x on an H200"),
    "foreach_adamw": Claim(1.2, "multi-tensor kernels: 8x on an H200"),
    "xla_poly": Claim(2.0, "XLA fuses 8 elementwise kernels into one"),
    "xla_relu": Claim(None, "not measured on a GPU by this course (its GPU runs had no "
                      "TensorFlow): an illustration, measured and shown, not asserted"),
    "steps_per_execution": Claim(1.2, "per-step host overhead paid once per N steps"),
    "compile_chain_prealloc": Claim(2.0, "3 kernels vs 1, each a full pass over memory: 3x "
                                    "predicted from bytes (the caching allocator makes eager's "
                                    "allocations cheap, so both baselines are close)"),
    "compile_gemm": Claim(0.8, "cuBLAS does the matmul either way; the fused epilogue saves "
                          "one pass over the output"),
}
#: Measured on an H200 (this course's GPU runs); the datasheet ratios come from each class's
#: own peaks (:func:`for_gpu`'s ``peaks``), never from one sentence for every GPU.
_H200_BF16_MATMUL = "13x measured on an H200"


def _ratio(peaks: Mapping[str, float] | None, fast: str, slow: str = "fp32") -> float | None:
    """Return ``peaks[fast] / peaks[slow]`` (the datasheet's speed ratio), or None if unknown."""
    if not peaks or fast not in peaks or slow not in peaks:
        return None
    return peaks[fast] / peaks[slow]


def _tc_claims(peaks: Mapping[str, float] | None, *, bf16: bool) -> dict[str, Claim]:
    """Return the tensor-core claims of a GPU with bf16 (or only fp16) tensor cores.

    Each reason quotes *this class's* datasheet ratio (16-bit peak / fp32 peak): 16x on an
    A100, 4x on an A10 or L4, 2x on a GeForce RTX 4090 (fp32 accumulation at half rate),
    unknown for a GPU not in the table.  A ratio under 3x lowers the floors that a 4x-16x
    ratio carries (2.0 for the matmul, 1.5 for the GPT step) to 1.2.
    """
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
    """Return the TF32 claim from this class's datasheet ratio (tf32 peak / fp32 peak).

    NVIDIA Ampere on (not claimed on ROCm, where whether PyTorch's TF32 switch reaches
    hipBLASLt is not measured by this course).  A floor of 1.3 where the datasheet promises at
    least 1.9x (2x on an A10/L4, 8x on an A100); none where TF32's peak is close to fp32's
    (1x on a GeForce RTX 4090, 1.7x on an H20) or unknown.
    """
    ratio = _ratio(peaks, "tf32")
    if ratio is None:
        return {"tf32_matmul": Claim(None, "TF32 tensor cores (sm_80+), but this GPU's datasheet "
                                     "is not in accelkit's table: the gain is not known here")}
    sheet = f"TF32 tensor cores: {ratio:.3g}x the IEEE fp32 peak on this class's datasheet"
    if ratio < 1.9:
        return {"tf32_matmul": Claim(None, sheet + ": too close to fp32 for a floor")}
    return {"tf32_matmul": Claim(1.3, sheet + "; the floor leaves room for a matmul below the "
                                 "datasheet's size")}


_NO_TENSOR_CORES = {
    "bf16_matmul": Claim(None, "no bf16 units before Ampere (and no tensor cores before Volta): "
                         "bf16 is emulated"),
    "amp_step_torch": Claim(None, "no tensor cores before Volta: fp16 halves the bytes, but the "
                            "matmuls run on the CUDA cores (a P100's 2x fp16 datasheet peak is "
                            "half2 arithmetic summing in fp16; PyTorch's GEMMs sum in fp32)"),
    "amp_step_tf": Claim(None, "no tensor cores before Volta: mixed_float16 saves bytes only"),
    "gpt_amp": Claim(None, "no tensor cores: half precision saves bytes only"),
}
_NO_TRITON = Claim(None, "Triton, torch.compile's GPU backend, needs compute capability 7.0+: "
                   "on a GPU before Volta torch.compile raises an error (Inductor: 'too old to "
                   "be supported by the triton GPU compiler')")


#: The CPUs of ``cpu-avx512-bf16`` (AVX512-BF16, no AMX) disagree on bf16, so the class decides
#: what the hardware *can* do and a measurement on the learner's machine what it *does*
#: (:func:`accelkit.precision.amp_path`): a 2-core Xeon VM that hides AMX ran a 1024² bf16 matmul
#: at 0.5x-0.55x of fp32 (bf16 0.08 vs fp32 0.15 TFLOP/s, steady over minutes; its verified
#: record, 0.533x), a 2-core AMD EPYC Zen 4 (family 25 model 17) at 2.9x (bf16 0.39-0.41 vs fp32
#: 0.10-0.14 TFLOP/s, five 0.5 s runs, torch 2.13: issue 27), oneDNN's brg_matmul:avx512_core_bf16
#: kernel running it there (ONEDNN_VERBOSE=1).  Re-measured on that Zen 4 on 2026-12-03 while
#: other jobs shared its 2 cores (load 4-5), so indicative only: 3.9x-4.6x in five compares of 12
#: pairs (fp32 0.028-0.035, bf16 0.117-0.135 TFLOP/s: load slows fp32 more), the same kernel;
#: no floor is taken from it (the measured path's floor is 1x, re-checked on every machine).
XEON_VM_BF16 = "0.55x of fp32 on a 2-core Xeon VM that hides AMX"
ZEN4_BF16 = ("2.9x on a 2-core AMD EPYC Zen 4 (oneDNN's brg_matmul:avx512_core_bf16 kernel), "
             "1024² matmul, torch 2.13")
#: CPU classes whose CPUs disagree on bf16: the bf16 claims (:data:`BF16_CLAIMS`) are decided
#: on the learner's machine by :func:`accelkit.precision.amp_path`, never by the class.
MEASURED_BF16_CLASSES = ("cpu-avx512-bf16",)
#: The claims that follow the bf16 (autocast dtype) matmul's speed.
BF16_CLAIMS = ("bf16_matmul", "amp_step_torch", "amp_step_tf", "gpt_amp")
_DISAGREE = f"this class's CPUs disagree ({XEON_VM_BF16}; {ZEN4_BF16})"

#: bf16 claims per CPU class with bf16 units.  AMX: the issue's measurements on a 2-core
#: Xeon VM with AMX, two modes (bf16 0.37 or 1.05 TFLOP/s against fp32 0.21 on a 1024²
#: matmul, so 1.7x-5x; the AMP step 0.79x-2.08x).  AVX512-BF16 without AMX: see above; the
#: class sets no floor and its notebooks take :func:`accelkit.precision.amp_path`'s.
_CPU_BF16_CLAIMS: dict[str, dict[str, Claim]] = {
    "cpu-amx": {
        "bf16_matmul": Claim(1.2, "AMX tiles: 1.7x (slow mode) to 5x (fast mode) on a 2-core "
                             "Xeon VM, 1024² matmul"),
        "amp_step_torch": Claim(None, "a small step is part matmul, part casts and overhead: "
                                "0.79x-2.08x measured on a 2-core Xeon VM (AMX's two speed "
                                "modes): no gain holds in both, so an illustration"),
        "amp_step_tf": Claim(None, "Keras casts each layer's inputs: 0.95x-1.52x measured on a "
                             "2-core Xeon VM: no gain holds, so an illustration"),
    },
    "cpu-avx512-bf16": {
        "bf16_matmul": Claim(None, "bf16 dot products (VDPBF16PS) exist, but " + _DISAGREE
                             + ": the class sets no floor; a short measurement on the "
                             "learner's machine decides (ak.precision.amp_path): a floor of 1x "
                             "where it finds bf16 faster, no claim where not"),
        "amp_step_torch": Claim(None, "follows the bf16 matmul, and " + _DISAGREE
                                + ": decided on the learner's machine (ak.precision.amp_path)"),
        "amp_step_tf": Claim(None, "follows the bf16 matmul, and " + _DISAGREE
                             + ": decided on the learner's machine (ak.precision.amp_path)"),
    },
}


def measured_bf16(faster: bool | None, finding: str, kernel: str = "") -> dict[str, Claim]:
    """Return the bf16 claims of a machine whose class lets a measurement decide (Zen 4 vs Xeon).

    Used by :func:`accelkit.precision.amp_path` for the classes in
    :data:`MEASURED_BF16_CLASSES`, after it timed a bf16 against an fp32 matmul on this
    machine: where bf16 was clearly faster, the notebooks' own bf16 matmul (fresh pairs, timed
    later) must be at least as fast as fp32 (floor 1.0); the training steps carry no floor
    (they add casts and fp32 work; no measurement of this class backs one), and where bf16
    was not faster (the Xeon VM's case) nothing is claimed.

    Args:
        faster: ``True`` where the measurement found bf16 clearly faster, ``False`` where it
            found it slower or not clearly faster, ``None`` where it was too noisy to say.
        finding: the measurement in words (``Comparison.finding()``).
        kernel: the oneDNN kernel that ran it (``"brg_matmul:avx512_core_bf16"``), or ``""``.

    Returns:
        ``{name: Claim}`` for every name in :data:`BF16_CLAIMS`.
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


_REAL_AVX2_GPT = "on an AVX2-only AMD EPYC (Zen 3, 2-core VM) at T = 256"
#: Notebook 06's GPT ladder (2 layers, width 128, 256 tokens, batch 8 on a CPU; GPT-2 small,
#: 1024 tokens on a GPU).  Each rung is timed against the rung below it, whole training steps.
_GPT_CPU_CLAIMS: dict[str, Claim] = {
    "gpt_sdpa": Claim(None, "the hand-written attention writes and reads the (B, H, T, T) "
                      "scores several times (scale, mask, softmax, their backward); the fused "
                      "kernel never stores them: medians 1.3x-1.4x " + _MEASURED_CPU + ", "
                      "1.14x-1.34x (intervals from 1.05x) " + _REAL_AVX2_GPT + ": a gain the "
                      "2-core machines' noise can hide, so the speed is an illustration and "
                      "the asserted lesson is the peak memory"),
    "gpt_amp": Claim(None, "follows the bf16 matmul: no claim on CPUs"),
    "gpt_compile": Claim(None, "fuses LayerNorm, GELU, residual adds and the loss's "
                         "elementwise work, but matmuls keep almost all of this step's time on "
                         "2 cores: 1.00x (interval 0.85x-1.17x), 1.02x (0.97x-1.06x) and 1.10x "
                         "(1.03x-2.1x) " + _MEASURED_CPU + ": no floor holds"),
    "gpt_fused_adamw": Claim(None, "the for-loop optimizer is 10-20% of this model's step "
                             "(profiler, ~40 parameter tensors): fused saves part of it, 1.03x "
                             "(interval 1.00x-1.23x) and 1.02x (0.92x-1.07x) " + _MEASURED_CPU
                             + ": an effect this small next to the noise decides no floor"),
}
_GPT_CPU_BF16: dict[str, dict[str, Claim]] = {
    "cpu-amx": {"gpt_amp": Claim(None, "as amp_step_torch: AMX's two speed modes put the step "
                                 "between ~0.8x and 2x of fp32: an illustration")},
    "cpu-avx512-bf16": {"gpt_amp": Claim(None, "follows the bf16 matmul, and " + _DISAGREE
                                         + ": decided on the learner's machine "
                                         "(ak.precision.amp_path)")},
}
_GPT_GPU_CLAIMS: dict[str, Claim] = {
    "gpt_sdpa": Claim(1.2, "FlashAttention never writes the T x T scores to HBM: at T = 1024 "
                      "the hand-written attention is memory-bound (Dao et al. 2022)"),
    "gpt_compile": Claim(1.05, "fuses the elementwise work between GEMMs (nanoGPT reports "
                         "~1.3x-2x on A100)"),
    "gpt_fused_adamw": Claim(None, "one kernel for ~150 parameter tensors, but the optimizer "
                             "is a small share of a GPT-2 small step and this course has not "
                             "measured it on a GPU: an illustration"),
}


#: The fusion floors above, re-measured in the ``cpu-avx2`` class twice: emulated (notebook 03
#: under ``ACCELKIT_HARDWARE=cpu-avx2`` on the Xeon CI CPU, a busy 2-core VM, 2026-12-01: eager
#: ATen, Inductor's C++ and the fused optimizers run 8-lane AVX2 code there), and for real (03's
#: stored run on an AVX2-only AMD EPYC, Zen 3, 2-core VM that CI also runs on, 2026-12-02).  The
#: intervals clear every floor (the GEMM's lowest, 0.74x, timed while other jobs shared the 2
#: cores; both sides call the same GEMM), so the class keeps the shared floors and cites
#: what was measured.
_EMULATED_AVX2 = ("as cpu-avx2, emulated on the CI CPU (ONEDNN_MAX_CPU_ISA=AVX2, "
                  "ATEN_CPU_CAPABILITY=avx2: models the 8-lane instruction set; not a laptop's "
                  "core count, caches, clocks or turbo)")
_AVX2_EMULATED: dict[str, str] = {
    "compile_chain_prealloc": "2.75x (interval 2.19x-3.36x)",
    "compile_chain": "6.46x (5.89x-7.84x)",
    "compile_gelu": "4.15x (2.92x-10.2x)",
    "compile_gemm": "1.00x (0.74x-1.13x on a machine busy with other jobs)",
    "fused_adamw": "10.6x (5.13x-53.7x)",
    "foreach_adamw": "4.36x (2.39x-14.2x)",
}  # the XLA rows are not here: the emulation does not cap XLA's CPU code (emulation.note)
_REAL_AVX2 = "on an AVX2-only AMD EPYC (Zen 3, 2-core VM, no AVX-512)"
_AVX2_REAL: dict[str, str] = {
    "compile_chain_prealloc": "2.80x (2.37x-3.04x)",
    "compile_chain": "12.6x (11.1x-15.5x)",
    "compile_gelu": "5.38x (4.91x-6.15x)",
    "compile_gemm": "0.96x (0.91x-1.01x)",
    "fused_adamw": "6.19x (5.44x-6.55x)",
    "foreach_adamw": "1.59x (1.52x-1.85x)",
    "xla_relu": "1.24x (1.03x-1.30x: XLA's own loop ran at 3.7 GB/s there, a copy at 29)",
    "xla_poly": "3.40x (2.81x-4.12x)",
}


def _remeasured(base: dict[str, Claim], *sources: tuple[dict[str, str], str]) -> dict[str, Claim]:
    """Return ``base``'s claims for the keys of the ``(measured, where)`` sources, each floor
    kept and its reason extended with every source that measured it."""
    keys = [k for k in base if any(k in measured for measured, _ in sources)]
    return {k: Claim(base[k].floor, "; ".join([base[k].why] + [
        f"{measured[k]} {where}" for measured, where in sources if k in measured]))
        for k in keys}


#: CPU classes whose fusion floors were re-measured in that class.
_CPU_CLASS_FUSION: dict[str, dict[str, Claim]] = {
    "cpu-avx2": _remeasured(_CPU_CLAIMS, (_AVX2_EMULATED, _EMULATED_AVX2),
                            (_AVX2_REAL, _REAL_AVX2)),
}


def for_cpu(name: str) -> dict[str, Claim]:
    """Return the claims a CPU class carries: shared CPU floors plus its bf16 and GPT ones,
    then the class's own re-measured table (``_CPU_CLASS_FUSION``), which replaces the shared
    entries it names.

    Args:
        name: the class name (``"cpu-amx"``); a name without bf16 entries gets the
            no-bf16-units floors.

    Returns:
        ``{claim name: Claim}``.
    """
    return (dict(_CPU_CLAIMS) | _CPU_BF16_CLAIMS.get(name, _NO_BF16_CPU) | _GPT_CPU_CLAIMS
            | _GPT_CPU_BF16.get(name, {}) | _CPU_CLASS_FUSION.get(name, {}))


def for_gpu(kind: str, cc: tuple[int, int], *, bf16: bool, tf32: bool,
            peaks: Mapping[str, float] | None = None) -> dict[str, Claim]:
    """Return the claims a GPU class carries, from its kind, matrix units and datasheet peaks.

    Args:
        kind: ``"cuda"`` or ``"rocm"``.
        cc: the compute capability (NVIDIA); below (7, 0) there are no tensor cores, so no
            autocast claim at all.
        bf16: bf16 tensor cores (else the fp16-only floors).
        tf32: TF32 tensor cores (claimed on NVIDIA only).
        peaks: the class's dense datasheet peaks (``{"fp32": 19.5, "bf16": 312.0, ...}``):
            each tensor-core reason quotes this class's own 16-bit/fp32 ratio, and a small
            ratio lowers the floor; ``None`` or ``{}`` for a GPU whose datasheet is not in the
            table.

    Returns:
        ``{claim name: Claim}``.
    """
    out = dict(_GPU_CLAIMS) | _GPT_GPU_CLAIMS | _tc_claims(peaks, bf16=bf16)
    if tf32 and kind == "cuda":
        out |= _tf32_claims(peaks)
    if kind == "cuda" and cc < (7, 0):
        out |= _NO_TENSOR_CORES | {name: _NO_TRITON for name in (
            "compile_chain", "compile_gelu", "compile_chain_prealloc", "compile_gemm",
            "gpt_compile")}
    return out


__all__ = ["BF16_CLAIMS", "CLAIMS", "MEASURED_BF16_CLASSES", "XEON_VM_BF16", "ZEN4_BF16", "Claim",
           "for_cpu", "for_gpu", "measured_bf16"]
