"""accelkit.tf_device: TensorFlow's devices and the clear error for configuring them too late."""

import os
import subprocess
import sys

import pytest

from accelkit import device, tf_device


def test_has_tf_does_not_import_tensorflow():
    import sys

    had = "tensorflow" in sys.modules
    tf_device.has_tf()
    assert ("tensorflow" in sys.modules) == had


@pytest.mark.skipif(not tf_device.has_tf(), reason="TensorFlow not installed")
def test_tf_devices_end_with_the_cpu_and_read_the_hardware_class():
    from accelkit import hardware

    devs = tf_device.tf_devices()
    cpu = devs[-1]
    assert isinstance(cpu, device.DeviceInfo) and cpu.kind == "cpu" and cpu.framework == "tf"
    assert cpu.supports_bf16 == hardware.for_device("cpu").bf16_units
    assert tf_device.best_tf_device().reason


def test_logical_cpus_must_be_positive():
    with pytest.raises(ValueError, match="n must be >= 1"):
        tf_device.tf_set_logical_cpus(0)


@pytest.mark.slow
@pytest.mark.skipif(not tf_device.has_tf(), reason="TensorFlow not installed")
def test_tf_too_late_configuration_raises_clear_error():
    import subprocess
    import sys

    code = (
        "import tensorflow as tf\n"
        "from accelkit import tf_device\n"
        "tf.constant(1.0)\n"  # initialises the runtime
        "try:\n"
        "    tf_device.tf_set_logical_cpus(3)\n"
        "except tf_device.TFAlreadyInitializedError as e:\n"
        "    print('RAISED', 'restart the kernel' in str(e).lower())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert "RAISED True" in out.stdout, out.stderr[-2000:]


@pytest.mark.slow
def test_import_tf_drops_the_load_noise_but_keeps_other_stderr():
    code = ("import os; from accelkit import tf_device as t\n"
            "with t._quiet_load_noise():\n"
            "    os.write(2, b'I0000 00:00:1.2 7 cudart_stub.cc:31] Could not find cuda drivers\\n')\n"
            "    os.write(2, b'E0000 a real error\\n')\n"
            "tf = t.import_tf()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0"))
    assert proc.returncode == 0, proc.stderr
    assert "cuda drivers" not in proc.stderr and "InitializeLog" not in proc.stderr
    assert "E0000 a real error" in proc.stderr
