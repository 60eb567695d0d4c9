"""The velocity task's episode ends: time-outs and terminations, and a diverged env reset and counted."""

from __future__ import annotations

import torch

from .velocity_envs import make_env


def test_time_out_and_termination_flags():
    env = make_env()
    env.episode_length_buf[:] = env.max_episode_length - 1
    env.episode_length_buf[1] = 0
    with torch.no_grad():
        _, _, dones, extras = env.step(torch.zeros(4, 12, dtype=torch.float64))
    assert dones.tolist() == [1, 0, 1, 1]
    assert extras["time_outs"].tolist() == [True, False, True, True]
    assert env.episode_length_buf.tolist() == [0, 1, 0, 0]
    # a robot lying on the ground: its base touches, the episode terminates (not a time-out)
    env.q = env.q.clone()
    env.q[2, 2] = 0.05
    with torch.no_grad():
        _, _, dones, extras = env.step(torch.zeros(4, 12, dtype=torch.float64))
    assert dones[2] == 1 and not extras["time_outs"][2]
    assert extras["log"]["Episode_Termination/terminated"] >= 1


def test_a_diverged_env_is_reset_and_counted():
    env = make_env()
    env.u = env.u.clone()
    env.u[0, 6] = float("nan")
    with torch.no_grad():
        obs, reward, dones, extras = env.step(torch.zeros(4, 12, dtype=torch.float64))
    assert dones[0] == 1 and not extras["time_outs"][0]
    assert extras["log"]["Episode_Termination/diverged"] == 1.0
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(reward).all()
    assert torch.isfinite(extras["final_observations"]["policy"]).all()
    assert torch.isfinite(env.q).all() and torch.isfinite(env.u).all()
