"""``DiffLoco-Quadruped-Forward``: a :class:`~..locomotion_env.LocomotionEnv` with SHAC's Ant observations.

Observation ``"policy"`` [N, 49]: base height (m, 1), base orientation quaternion (w, x, y, z) (4), base linear
velocity of the base origin (world, m/s, 3), base angular velocity (world, rad/s, 3), joint angles (rad, 12, Isaac
Lab's joint order), joint velocities x 0.1 (12), the z component of the base's up axis (1), the base's x axis
along the walking direction (world x) (1), last actions (12) — DiffRL's Ant layout for a 12-joint robot.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from ..locomotion_env import LocomotionEnv
from ..robot_state import quat_rotate
from .env_cfg import QuadrupedForwardEnvCfg


class QuadrupedForwardEnv(LocomotionEnv):
    cfg_class = QuadrupedForwardEnvCfg
    num_policy_obs = 49

    def _axes(self):
        quat = self.q[:, 3:7]
        unit = torch.eye(3, dtype=self.dtype, device=self.device)
        return (quat_rotate(quat, unit[0].expand(self.num_envs, 3)),
                quat_rotate(quat, unit[2].expand(self.num_envs, 3)))

    def _observations(self) -> TensorDict:
        quat = self.q[:, 3:7]
        forward, up = self._axes()
        ang_vel_w = quat_rotate(quat, self.u[:, 3:6])
        obs = torch.cat([self.q[:, 2:3], quat, self.u[:, 0:3], ang_vel_w, self.q[:, 7:][:, self.to_isaaclab],
                         self.cfg.joint_vel_obs_scale * self.u[:, 6:][:, self.to_isaaclab], up[:, 2:3],
                         forward[:, 0:1], self.actions], dim=1)
        return TensorDict({"policy": obs}, batch_size=[self.num_envs])

    def _rewards(self, out, before):
        c = self.cfg.rewards
        forward, up = self._axes()
        terms = {
            "speed": c.speed * torch.exp(-torch.square(self.u[:, 0] - c.target_speed) / c.speed_std**2),
            "up": c.up * up[:, 2],
            "heading": c.heading * forward[:, 0],
            "height": c.height * (self.q[:, 2] - self.cfg.termination_height),
            "action": c.action * torch.sum(torch.square(self.actions), dim=1),
        }
        return sum(terms.values()), terms

    def _terminated(self, out) -> torch.Tensor:
        return self.q[:, 2].detach() < self.cfg.termination_height

    def _metrics(self, out) -> dict[str, torch.Tensor]:
        return {"forward_speed": self.u[:, 0], "speed_error": (self.u[:, 0] - self.cfg.rewards.target_speed).abs()}

    def _sample_reset(self):
        N, noise = self.num_envs, self.cfg.reset_noise
        q = torch.tensor(self.model.default_q(), dtype=self.dtype, device=self.device)
        q[:, 7:] += self.uniform(-noise, noise, N, self.num_actions)
        u = torch.zeros(N, self.model.nv, dtype=self.dtype, device=self.device)
        u[:, :6] = self.uniform(-noise, noise, N, 6)
        return q, u
