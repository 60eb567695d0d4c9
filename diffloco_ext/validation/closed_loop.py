"""Closed-loop evaluation of a velocity-tracking policy on a validation backend, with the task's own conventions:
the observation function of the task (:func:`~diffloco_ext.tasks.velocity.observations.policy_observation`), its
joint order and action scale, its command generator (random commands as in training, heading mode included),
its reset distribution's nominal pose, no observation noise and nominal parameters. The command ranges are the
full ones: a training curriculum in ``commands`` (``curriculum_initial_scale`` < 1) is switched off here, since a
fresh command generator would otherwise start at the curriculum's narrow initial ranges.

The policy is called as deployed: ``actions = policy(obs)`` with ``obs`` [N, 48] float32 (a TorchScript file
exported by ``scripts/play.py`` or the runner's inference policy), ``actions`` [N, 12].

Per episode: the mean planar velocity error ``|v_xy* - v_xy|`` (m/s, base frame, centre of mass, as the tracking
reward reads it), the mean yaw-rate error (rad/s), and whether the robot fell (a base collision shape at or below
the ground, or the base below ``fall_height``); a fallen robot's episode ends there.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ..sim.body_contacts import body_gaps
from ..tasks.robot_state import BaseState, yaw_quat
from ..tasks.velocity.commands import VelocityCommand
from ..tasks.velocity.env_cfg import CommandsCfg
from ..tasks.velocity.observations import policy_observation


@dataclass
class EpisodeStats:
    """Per-episode results [E] and the traces of the first episodes (for plots)."""

    lin_vel_error: np.ndarray  # m/s, mean over the episode
    ang_vel_error: np.ndarray  # rad/s
    fell: np.ndarray  # bool
    length_s: np.ndarray  # s until the end or the fall
    traces: dict = field(default_factory=dict)  # time series [T, N, .] of the first batch

    def summary(self) -> dict[str, float]:
        return {"episodes": int(self.fell.size), "lin_vel_xy_error": float(self.lin_vel_error.mean()),
                "ang_vel_z_error": float(self.ang_vel_error.mean()), "falls": int(self.fell.sum()),
                "mean_length_s": float(self.length_s.mean())}


def evaluate_velocity_tracking(backend, policy, robot, model, *, episodes: int, episode_length_s: float = 20.0,
                               commands: CommandsCfg | None = None, action_scale: float = 0.5,
                               base_height: float = 0.6, seed: int = 0, fall_height: float = 0.25,
                               record: bool = False, progress=None) -> EpisodeStats:
    """Run ``episodes`` episodes (in batches of ``backend.num_envs``) of ``policy`` on ``backend``.

    ``model``: a :class:`~diffloco_ext.sim.model.Model` of ``robot`` (its kinematics give the collision gaps
    of the backend's states, and its nominal base centre of mass the observation's velocity point)."""
    N = backend.num_envs
    if model.num_envs != N:
        raise ValueError(f"model has {model.num_envs} envs, the backend {N}: build the model with the backend's")
    dt = backend.policy_dt
    steps = int(round(episode_length_s / dt))
    to_isaaclab = torch.as_tensor(robot.isaaclab_permutation())
    to_sim = torch.argsort(to_isaaclab)
    default_sim = torch.as_tensor(robot.default_joint_positions(), dtype=torch.float64)
    default_il = default_sim[to_isaaclab]
    base_com = torch.tensor(np.asarray(model.body_com.numpy()[:N, 0], dtype=np.float64))
    generator = torch.Generator().manual_seed(seed)
    base_index = [i for i, n in enumerate(model.collision.body_names) if n == "base"] if model.collision else []
    commands = validation_commands(commands or CommandsCfg())
    lin, ang, fell, length, traces = [], [], [], [], {}
    for batch in range(int(np.ceil(episodes / N))):
        cmd = VelocityCommand(commands, N, torch.device("cpu"), generator)
        q = torch.tensor(model.default_q(base_height=base_height)[:N], dtype=torch.float64)
        q[:, 3:7] = yaw_quat((torch.rand(N, generator=generator, dtype=torch.float64) * 2 - 1) * np.pi)
        u = torch.zeros(N, model.nv, dtype=torch.float64)
        backend.reset(q, u)
        cmd.resample(torch.ones(N, dtype=torch.bool))
        actions = torch.zeros(N, robot.num_joints, dtype=torch.float64)
        alive = torch.ones(N, dtype=torch.bool)
        err_lin, err_ang, count = torch.zeros(N, dtype=torch.float64), torch.zeros(N, dtype=torch.float64), torch.zeros(N)
        rec = {k: [] for k in ("time", "command", "lin_vel_b", "ang_vel_b", "joint_pos", "joint_target", "base_height")}
        for t in range(steps):
            q, u = backend.state()
            cmd.update(dt, BaseState(q, u, base_com).heading)
            with torch.no_grad():
                obs = policy_observation(q, u, base_com, cmd.command.double(), actions, default_il, to_isaaclab)
                actions = policy(obs.float()).double()
            target = default_sim + action_scale * actions[:, to_sim]
            backend.step(target)
            q, u = backend.state()
            base = BaseState(q, u, base_com)
            v_err = torch.linalg.norm(cmd.command[:, :2].double() - base.lin_vel_b[:, :2], dim=1)
            w_err = (cmd.command[:, 2].double() - base.ang_vel_b[:, 2]).abs()
            err_lin += torch.where(alive, v_err, torch.zeros_like(v_err))
            err_ang += torch.where(alive, w_err, torch.zeros_like(w_err))
            count += alive.float()
            down = q[:, 2] < fall_height
            if base_index:
                gaps = body_gaps(model, _warp_q(model, q)).numpy()
                down |= torch.as_tensor(gaps[:, base_index].min(axis=1) <= 0.0)
            alive &= ~down
            if record and batch == 0:
                rec["time"].append((t + 1) * dt)
                rec["command"].append(cmd.command.clone().numpy())
                rec["lin_vel_b"].append(base.lin_vel_b.numpy())
                rec["ang_vel_b"].append(base.ang_vel_b.numpy())
                rec["joint_pos"].append(q[:, 7:][:, to_isaaclab].numpy())
                rec["joint_target"].append(target[:, to_isaaclab].numpy())
                rec["base_height"].append(q[:, 2].numpy())
            if progress is not None and t % 100 == 0:
                progress(batch, t, steps)
        take = min(N, episodes - batch * N)
        lin.append((err_lin / count.clamp(min=1))[:take].numpy())
        ang.append((err_ang / count.clamp(min=1))[:take].numpy())
        fell.append((~alive)[:take].numpy())
        length.append((count * dt)[:take].numpy())
        if record and batch == 0:
            traces = {k: np.asarray(v) for k, v in rec.items()}
    return EpisodeStats(np.concatenate(lin), np.concatenate(ang), np.concatenate(fell), np.concatenate(length),
                        traces)


def validation_commands(commands: CommandsCfg) -> CommandsCfg:
    """``commands`` with any training curriculum switched off (validation samples the full ranges)."""
    return replace(commands, curriculum_initial_scale=1.0, curriculum_steps=0)


def _warp_q(model, q: torch.Tensor):
    import warp as wp

    return wp.array(q.numpy().astype(model.np_dtype), dtype=model.dtype, device=model.device)
