import pytest

from accelkit import config


def test_explicit_profiles_and_pick(monkeypatch):
    monkeypatch.setenv("ACCELKIT_PROFILE", "full")
    p = config.profile()
    assert p.name == "full" and p.is_full and p.pick(ci=1, full=2) == 2
    assert config.profile("ci").pick(ci=1, full=2) == 1


def test_auto_follows_accelerator(monkeypatch):
    from accelkit import device

    monkeypatch.setattr(device, "accelerator_name", lambda: "cuda:0 Fake GPU")
    assert config.profile("auto").name == "full"
    monkeypatch.setattr(device, "accelerator_name", lambda: None)
    p = config.profile("auto")
    assert p.name == "ci" and "no accelerator" in p.reason


def test_unknown_profile_is_a_clear_error():
    with pytest.raises(ValueError, match="'ci', 'full' or 'auto'"):
        config.profile("huge")


def test_seed_everything_makes_torch_and_numpy_repeatable():
    import numpy as np
    import torch

    config.seed_everything(3)
    a = (torch.rand(3), np.random.rand(2))
    config.seed_everything(3)
    b = (torch.rand(3), np.random.rand(2))
    assert torch.equal(a[0], b[0]) and (a[1] == b[1]).all()
    with pytest.raises(ValueError):
        config.seed_everything(-1)


def test_scratch_dir_honours_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELKIT_SCRATCH", str(tmp_path / "s"))
    d = config.scratch_dir("workers")
    assert d == tmp_path / "s" / "workers" and d.is_dir()
