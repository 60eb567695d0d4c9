"""Multi-node training as far as one machine allows: two ``torchrun`` agents, ``--nnodes=2`` with one rank each, meet
through a c10d rendezvous on localhost (as two machines meet through one's address), train the velocity task's recipe
with ``scripts/train.py``'s module, and resume the run on two nodes again."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import torch

TASK = "DiffLoco-Velocity-Flat-AnymalD"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _two_nodes(tmp_path, name: str, *extra: str) -> list[str]:
    """Launch the two agents (node ranks 0 and 1) and wait; returns their outputs."""
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = []
    for node in (0, 1):
        cmd = [torchrun, "--nnodes=2", "--nproc_per_node=1", f"--node_rank={node}", "--rdzv_backend=c10d",
               f"--rdzv_endpoint=localhost:{port}", f"--rdzv_id={name}", "-m", "diffloco_ext.learning.train",
               "--task", TASK, "--num_envs", "4", "--seed", "3", "--log_root", str(tmp_path), "--run_name", name,
               "agent.save_interval=1", *extra]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    return outs


def test_two_nodes_train_and_resume_through_a_c10d_rendezvous(tmp_path):
    outs = _two_nodes(tmp_path, "nodes", "--max_iterations", "2")
    assert "rank 1 (rank 0 logs)" in "".join(outs)
    root = tmp_path / "shac" / "anymal_d_flat"
    (run,) = [d for d in root.iterdir() if d.name.endswith("_nodes")]
    checkpoint = torch.load(run / "model_2.pt", weights_only=False)
    assert checkpoint["iter"] == 2 and len(checkpoint["rank_states"]) == 2  # both nodes' envs in the checkpoint
    outs = _two_nodes(tmp_path, "resumed", "--max_iterations", "1", "--resume", "--checkpoint", str(run / "model_2.pt"))
    (resumed,) = [d for d in root.iterdir() if d.name.endswith("_resumed")]
    after = torch.load(resumed / "model_3.pt", weights_only=False)
    assert after["iter"] == 3 and len(after["rank_states"]) == 2
    assert "resuming from" in outs[0]
    before, now = checkpoint["actor_state_dict"], after["actor_state_dict"]
    assert any(not torch.equal(before[k], now[k]) for k in before)  # it trained on
