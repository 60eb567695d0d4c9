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


def test_a_resumed_two_rank_run_continues_each_ranks_own_episodes(tmp_path):
    """A data-parallel checkpoint holds every rank's env and RNG state: resumed on two ranks, each continues its
    own envs (before, both loaded rank 0's and trained as duplicates: the same gradient twice, half the batch);
    a single process's checkpoint resumed on two ranks gives rank 1 streams of its own (its envs diverge)."""
    import contextlib
    import io

    from diffloco_ext.learning import SHACRunnerCfg, make_runner
    from diffloco_ext.learning.toy_envs import PointMassCfg, PointMassEnv

    torchrun = _torchrun()
    if torchrun is None:
        pytest.skip("torchrun is not installed in this environment")
    env = dict(os.environ, OMP_NUM_THREADS="1")

    def launch(mode):
        cmd = [torchrun, "--standalone", "--nnodes=1", "--nproc_per_node=2", WORKER, str(tmp_path), "0", mode]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return [torch.load(tmp_path / f"{mode}{r}.pt", weights_only=False) for r in (0, 1)]

    saved = launch("save")
    assert not torch.equal(saved[0]["saved"], saved[1]["saved"])
    resumed = launch("resume")
    for r in (0, 1):
        assert torch.equal(resumed[r]["loaded"], saved[r]["saved"])  # each rank its own envs
    assert not torch.equal(resumed[0]["after"], resumed[1]["after"])
    assert torch.equal(resumed[0]["params"], resumed[1]["params"])  # still one model
    # a single process's checkpoint (one env state) on two ranks: rank 1 loads it, then draws its own numbers
    torch.manual_seed(0)
    single_env = PointMassEnv(PointMassCfg(num_envs=8, seed=0, dim=3, max_episode_length=12))
    cfg = SHACRunnerCfg(num_steps_per_env=4, max_iterations=2, save_interval=2)
    cfg.algorithm.num_critic_epochs = 1
    with contextlib.redirect_stdout(io.StringIO()):
        make_runner(single_env, cfg, log_dir=str(tmp_path / "run_single"), device="cpu").learn(2)
    single = launch("resume_single")
    assert torch.equal(single[0]["loaded"], single[1]["loaded"])
    assert not torch.equal(single[0]["after"], single[1]["after"])
