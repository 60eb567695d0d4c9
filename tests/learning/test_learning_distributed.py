"""Data-parallel SHAC and PPO: two CPU processes (gloo) launched by torchrun."""

import os
import shutil
import subprocess
import sys

import pytest
import torch

WORKER = os.path.join(os.path.dirname(__file__), "_dist_worker.py")


def _torchrun() -> str | None:
    candidate = os.path.join(os.path.dirname(sys.executable), "torchrun")
    return candidate if os.path.exists(candidate) else shutil.which("torchrun")


def test_two_process_gloo_training_keeps_ranks_identical_and_learns(tmp_path):
    torchrun = _torchrun()
    if torchrun is None:
        pytest.skip("torchrun is not installed in this environment")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [torchrun, "--standalone", "--nnodes=1", "--nproc_per_node=2", WORKER, str(tmp_path), "12"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=False)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=False)
    assert r0["world_size"] == r1["world_size"] == 2 and r0["backend"] == "gloo"
    assert not torch.equal(r0["before"], r1["before"])  # started different: equality below is not trivial
    assert torch.equal(r0["after"], r1["after"])  # broadcast + gradient all-reduce + shared normaliser stats
    assert not torch.equal(r0["before"], r0["after"])
    for r in (r0, r1):
        assert r["skipped"] == 0
        assert r["final"] > r["initial"] + 5.0, (r["initial"], r["final"])


def test_two_process_ppo_on_cpu_keeps_ranks_identical(tmp_path):
    """rsl_rl's own multi-process set-up demands cuda:<LOCAL_RANK> and NCCL; ours runs PPO on two CPU ranks."""
    torchrun = _torchrun()
    if torchrun is None:
        pytest.skip("torchrun is not installed in this environment")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [torchrun, "--standalone", "--nnodes=1", "--nproc_per_node=2", WORKER, str(tmp_path), "3", "ppo"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=False)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=False)
    assert r0["world_size"] == r1["world_size"] == 2 and r0["backend"] == "gloo"
    assert not torch.equal(r0["before"], r1["before"])
    assert torch.equal(r0["after"], r1["after"])
    assert not torch.equal(r0["before"], r0["after"])
