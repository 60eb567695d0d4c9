"""The velocity task's policy observation, as one function of the robot state: the definition every backend
uses (the training env, our hard-contact replay, MuJoCo, Isaac Lab), so there is no second copy to drift.

``policy_observation`` [N, 48], Isaac Lab's ``Isaac-Velocity-Flat-AnymalD`` order and units, no scaling or
clipping: base linear velocity of the centre of mass in the base frame (m/s, 3), base angular velocity in the
base frame (rad/s, 3), projected gravity (3), command (vx, vy m/s, wz rad/s) (3), joint positions minus default
(rad, 12), joint velocities (rad/s, 12), last actions (12); joints in Isaac Lab's order.

With generated terrain (``VelocityEnvCfg.terrain``) Isaac Lab's ``Isaac-Velocity-Rough-AnymalD`` interface: the 48,
then its height scan (187 values, :mod:`.height_scan`): 235.

``gait_clock_observation`` [N, 2]: the gait-clock interface's two extra inputs, appended after the 48 (and the scan)
(``VelocityEnvCfg.gait_clock``): ``sin(2 pi t / T)``, ``cos(2 pi t / T)``, ``t`` the time since the episode (on a
robot: the policy) started (s), ``T`` the gait's period (s) -- the cycle phase at which the foot-height reference
has the left-front foot begin its swing at phase 0 (:mod:`.gaits`).
"""

from __future__ import annotations

import torch

from ..robot_state import BaseState

#: Observation terms of the policy group, in order, with their sizes.
POLICY_TERMS = (("base_lin_vel", 3), ("base_ang_vel", 3), ("projected_gravity", 3), ("velocity_commands", 3),
                ("joint_pos", 12), ("joint_vel", 12), ("actions", 12))

#: The rough interface's height scan (Isaac Lab's 17 x 11 grid), after :data:`POLICY_TERMS`.
HEIGHT_SCAN_TERM = ("height_scan", 187)

#: The gait-clock interface's extra term, last.
GAIT_CLOCK_TERM = ("gait_clock", 2)


def policy_terms(gait_clock: bool, height_scan: bool = False) -> tuple[tuple[str, int], ...]:
    """The policy group's terms, in order: Isaac Lab's 48, the height scan on terrain, then the gait clock where the
    task has them."""
    return POLICY_TERMS + ((HEIGHT_SCAN_TERM,) if height_scan else ()) + ((GAIT_CLOCK_TERM,) if gait_clock else ())


def task_policy_terms(cfg) -> tuple[tuple[str, int], ...]:
    """:func:`policy_terms` of a velocity task config."""
    return policy_terms(bool(getattr(cfg, "gait_clock", False)), getattr(cfg, "terrain", None) is not None)


def num_policy_observations(cfg) -> int:
    """The policy observation's size of a velocity task config (48; 235 on terrain; + 2 with ``cfg.gait_clock``)."""
    return sum(size for _, size in task_policy_terms(cfg))


def gait_clock_observation(time: torch.Tensor, period: float) -> torch.Tensor:
    """[N, 2]: ``(sin, cos)`` of ``2 pi time / period`` for ``time`` [N] (s since the episode started)."""
    angle = (2.0 * torch.pi / period) * torch.remainder(time, period)
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=1)


def policy_observation(q: torch.Tensor, u: torch.Tensor, base_com: torch.Tensor, command: torch.Tensor,
                       last_action: torch.Tensor, default_joint_pos: torch.Tensor,
                       to_isaaclab: torch.Tensor) -> torch.Tensor:
    """The 48 observations (no noise) of states ``q`` [N, 7 + n], ``u`` [N, 6 + n] (simulator conventions and
    joint order, see :mod:`..robot_state`), the base's centre of mass ``base_com`` [N, 3] (base frame, m),
    ``command`` [N, 3], ``last_action`` [N, n] and ``default_joint_pos`` [n] (both Isaac Lab's joint order);
    ``to_isaaclab`` [n]: ``x_isaaclab = x_sim[:, to_isaaclab]``."""
    base = BaseState(q, u, base_com)
    joint_pos = q[:, 7:][:, to_isaaclab] - default_joint_pos
    joint_vel = u[:, 6:][:, to_isaaclab]
    return torch.cat([base.lin_vel_b, base.ang_vel_b, base.projected_gravity_b, command.to(q.dtype), joint_pos,
                      joint_vel, last_action.to(q.dtype)], dim=1)
