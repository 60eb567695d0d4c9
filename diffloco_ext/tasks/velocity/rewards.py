"""Reward terms of the velocity task, each differentiable in torch (per env, [N]; units in each docstring).

Isaac Lab's definitions (``isaaclab/envs/mdp/rewards.py``) where they are differentiable; the others replaced by
smooth terms (see :class:`~.env_cfg.RewardsCfg`). The env multiplies each term by its weight and the policy
step (s), as Isaac Lab's reward manager does.
"""

from __future__ import annotations

import torch

from diffloco_ext.assets.robot_description import ActuatorParams


def track_lin_vel_xy_exp(command: torch.Tensor, lin_vel_b: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-|(vx, vy)* - (vx, vy)|^2 / std^2)``: base-frame planar velocity of the centre of mass (m/s)."""
    return torch.exp(-torch.sum(torch.square(command[:, :2] - lin_vel_b[:, :2]), dim=1) / std**2)


def track_ang_vel_z_exp(command: torch.Tensor, ang_vel_b: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-(wz* - wz)^2 / std^2)`` (rad/s)."""
    return torch.exp(-torch.square(command[:, 2] - ang_vel_b[:, 2]) / std**2)


def lin_vel_z_l2(lin_vel_b: torch.Tensor) -> torch.Tensor:
    """Squared vertical base velocity (m²/s²)."""
    return torch.square(lin_vel_b[:, 2])


def ang_vel_xy_l2(ang_vel_b: torch.Tensor) -> torch.Tensor:
    """Squared roll and pitch rates (rad²/s²)."""
    return torch.sum(torch.square(ang_vel_b[:, :2]), dim=1)


def flat_orientation_l2(projected_gravity_b: torch.Tensor) -> torch.Tensor:
    """Squared horizontal components of the gravity direction in the base frame (0 when level)."""
    return torch.sum(torch.square(projected_gravity_b[:, :2]), dim=1)


def joint_torques_l2(torque: torch.Tensor) -> torch.Tensor:
    """Sum of squared joint torques (N²m²), the torques applied over the policy step (their mean)."""
    return torch.sum(torch.square(torque), dim=1)


def joint_acc_l2(joint_vel: torch.Tensor, joint_vel_before: torch.Tensor, dt: float) -> torch.Tensor:
    """Sum of squared joint accelerations (rad²/s⁴), the mean acceleration over the policy step of ``dt`` s
    (Isaac Lab's engines report the last physics step's)."""
    return torch.sum(torch.square((joint_vel - joint_vel_before) / dt), dim=1)


def action_rate_l2(action: torch.Tensor, previous_action: torch.Tensor) -> torch.Tensor:
    """Sum of squared changes of the raw actions between policy steps."""
    return torch.sum(torch.square(action - previous_action), dim=1)


def foot_slip(foot_height: torch.Tensor, foot_vel: torch.Tensor, height: float, width: float) -> torch.Tensor:
    """``sum_f s(h_f) |v_f,xy|`` (m/s): the horizontal speed of the feet (world, m/s) weighted by a smooth stance
    indicator ``s(h) = sigmoid((height - h) / width)`` of the foot's height above the ground ``h`` (m) -- 1 on the
    ground, 1/2 at ``height``, ~0 a few ``width`` above it. A differentiable stand-in for Isaac Lab's foot-slip
    penalty (contact flag x foot speed, its Spot task): it penalises feet sliding in stance and feet dragged
    along the ground in swing, and its gradient w.r.t. ``h`` lifts a moving foot clear of the ground."""
    stance = torch.sigmoid((height - foot_height) / width)
    speed = torch.sqrt(torch.sum(torch.square(foot_vel[..., :2]), dim=-1) + 1e-12)
    return torch.sum(stance * speed, dim=1)


def excess_joint_vel_l2(joint_vel: torch.Tensor, limit: float) -> torch.Tensor:
    """``sum_j max(0, |qd_j| - limit)^2`` (rad²/s²): joint speeds beyond ``limit`` rad/s (e.g. a fraction of the
    DC motor's no-load speed, beyond which the motor only brakes)."""
    return torch.sum(torch.square(torch.relu(joint_vel.abs() - limit)), dim=1)


def torque_saturation_l2(demand: torch.Tensor, joint_vel: torch.Tensor, actuator: ActuatorParams) -> torch.Tensor:
    """``sum_j (d_j / E)^2`` (1), ``d_j`` (N·m) the part of joint ``j``'s PD demand ``demand`` that lies outside the
    DC-motor envelope at its speed ``joint_vel`` (``actuator.torque_bounds``), ``E`` the effort limit: the torque
    the policy asks for and the motor cannot give (the validation gates the fraction of such samples). Its
    gradient lowers the demand (a smaller target step) or the speed that shrinks the envelope."""
    lower, upper = actuator.torque_bounds(joint_vel)
    excess = torch.relu(demand - upper) + torch.relu(lower - demand)
    return torch.sum(torch.square(excess / actuator.effort_limit), dim=1)


def penetration(gaps: torch.Tensor, scale: float = 100.0) -> torch.Tensor:
    """Sum over bodies of ``scale * max(0, -gap)`` (gap in m, negative when penetrating): the smooth stand-in
    for a count of contacts (1 per cm of penetration with the default scale)."""
    return scale * torch.sum(torch.relu(-gaps), dim=1)


def joint_pos_limits(joint_pos: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor) -> torch.Tensor:
    """Sum of the joint angles' distances outside ``[lower, upper]`` (rad), as Isaac Lab's ``joint_pos_limits``."""
    return torch.sum(torch.relu(joint_pos - upper) + torch.relu(lower - joint_pos), dim=1)


def foot_height_tracking_exp(foot_height: torch.Tensor, reference: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-sum_f (h_f - h_ref_f)^2 / std^2)`` for foot heights [N, F] above the ground (m)."""
    return torch.exp(-torch.sum(torch.square(foot_height - reference), dim=1) / std**2)


def swing_contact_force(swing: torch.Tensor, normal_force: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``sum_f s_f F_f / W`` (1): the ground's normal force ``normal_force`` [N, F] (N, >= 0) on each foot weighted by
    how far the gait has it in its swing, ``swing`` [N, F] in [0, 1] (the foot-height reference over its apex: 0 in
    stance, 1 mid-swing), as a fraction of the robot's weight ``weight`` [N] (N). A foot that carries the body when
    the gait lifts it costs; with the clock among the inputs this sets which feet support the body when (the
    swing-phase force term of periodic gait rewards: Siekmann et al., arXiv 2011.01387; Margolis and Agrawal,
    arXiv 2212.03238)."""
    return torch.sum(swing * torch.relu(normal_force), dim=1) / weight


def paired_contact_force(pairs: torch.Tensor, normal_force: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``sum_(i, j) |F_i - F_j| / W`` (1): over the feet pairs ``pairs`` [P, 2] (indices into the feet) that the gait
    moves together, the difference of the ground's normal forces ``normal_force`` [N, F] (N, >= 0) on the two feet,
    as a fraction of the robot's weight ``weight`` [N] (N). Zero when each pair lands, carries and lifts off
    together; a pair split in time (one foot loaded while its partner swings) costs up to the load it carries."""
    force = torch.relu(normal_force)
    if pairs.numel() == 0:
        return torch.zeros_like(weight)
    return torch.sum(torch.abs(force[:, pairs[:, 0]] - force[:, pairs[:, 1]]), dim=1) / weight
