"""The result keys that issues and users compare runs by stay recorded by their notebooks."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

REQUIRED = {
    "00_device_setup": ["roofline.matmul_fp32_tflops", "roofline.matmul_bf16_tflops",
                        "roofline.copy_gbps", "digits.torch_test_acc", "digits.tf_test_acc",
                        "async.torch_naive_over_synced", "copy.pinned_speedup"],
    "01_data_vs_model_parallelism": [
        "parallel.dp_grad_max_abs_err", "parallel.tp_max_abs_err", "parallel.pp_max_abs_err",
        "parallel.pp_bubble_predicted", "parallel.pp_bubble_measured",
        "parallel.fsdp_param_bytes_per_rank_measured",
        "parallel.fsdp_param_bytes_per_rank_predicted",
        "memory.ddp_peak_bytes_measured", "memory.ddp_peak_bytes_predicted",
        "memory.fsdp_peak_bytes_measured", "memory.fsdp_peak_bytes_predicted",
        "parallel.allreduce_bus_gbps"],
    "02_mixed_precision": ["amp.matmul_bf16_speedup", "amp.train_step_speedup_torch",
                           "amp.train_step_speedup_tf", "amp.acc_delta_torch",
                           "amp.cpu_threads_speedup", "amp.cpu_channels_last_speedup",
                           "amp.cpu_batch_speedup"],
    "03_operator_fusion": ["fusion.compile_speedup", "fusion.compiled_copy_bw_fraction",
                           "fusion.xla_speedup_tf", "fusion.fused_adamw_speedup",
                           "fusion.conv_bn_max_abs_err",
                           "fusion.compile_speedup_vs_allocating_eager",
                           "fusion.compile_cold_s", "fusion.compile_warm_s"],
    "04_distributed_data_parallel": ["ddp.replica_max_abs_diff", "ddp.vs_single_max_abs_err",
                                     "ddp.scaling_efficiency", "ddp.allreduce_predicted_s",
                                     "ddp.allreduce_measured_s", "ddp.solo_step_s",
                                     "ddp.one_bucket_vs_default_speedup",
                                     "ddp.grad_copy_saved_bytes", "ddp.uneven_hang_report_s"],
    "05_tpu": ["tpu.replicas", "tpu.xla_first_call_s", "tpu.xla_steady_call_s",
               "tpu.recompiles_on_new_shape", "tpu.spmd_devices", "tpu.spmd_dp_max_abs_err",
               "tpu.spmd_tp_max_abs_err", "tpu.keras_jax_dp_acc", "tpu.keras_jax_acc_delta",
               "tpu.jax_first_call_s", "tpu.jax_steady_call_s", "tpu.jax_recompiles_on_new_shape"],
    "06_capstone_gpt": ["gpt.params", "gpt.tokens_per_s_baseline", "gpt.tokens_per_s_final",
                        "gpt.ladder_speedup", "gpt.mfu_baseline", "gpt.mfu_final",
                        "gpt.sdpa_speedup", "gpt.sdpa_peak_mem_ratio", "gpt.ckpt_peak_mem_ratio",
                        "gpt.ckpt_time_ratio", "gpt.no_sync_allreduce_ratio",
                        "gpt.ddp_scaling_efficiency", "gpt.loss_delta_max",
                        "gpt.keras_tokens_per_s"],
}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_notebook_records_its_keys(name):
    path = ROOT / "notebooks" / f"{name}.ipynb"
    if not path.exists():
        pytest.fail(f"{path.name} is missing")
    code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                     if c["cell_type"] == "code")
    missing = [k for k in REQUIRED[name] if f'"{k}"' not in code and f"'{k}'" not in code]
    assert not missing, f"{name} no longer records {missing}"
