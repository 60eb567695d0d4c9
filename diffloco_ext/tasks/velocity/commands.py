"""Velocity commands as Isaac Lab's ``UniformVelocityCommand``: (vx, vy) in m/s in the base frame and a yaw rate
wz in rad/s, uniform in their ranges, resampled at resets and every ``resampling_time``; in heading mode wz is
recomputed every policy step from a heading target, ``wz = clip(k wrap(heading* - heading), wz range)``; a
fraction of envs stands (command zero).

The command is exogenous to the learner: no gradient flows through the heading feedback (the base heading is
detached), so a differentiable-simulation learner cannot raise its tracking reward by steering its own command."""

from __future__ import annotations

import math

import torch

from ..robot_state import wrap_to_pi
from .env_cfg import CommandsCfg


class VelocityCommand:
    """Per-env commands [N, 3] (vx, vy, wz), their heading targets and resampling timers."""

    def __init__(self, cfg: CommandsCfg, num_envs: int, device, generator: torch.Generator):
        lo, hi = cfg.boundary_command_scale
        if not 0.0 <= cfg.boundary_command_fraction <= 1.0 or not 0.0 < lo <= hi <= 1.0:
            raise ValueError(f"boundary_command_fraction must be in [0, 1] and boundary_command_scale (lo, hi) with "
                             f"0 < lo <= hi <= 1, got {cfg.boundary_command_fraction} and {cfg.boundary_command_scale}")
        accel = cfg.tracking_reference_accel
        if accel is not None and not (len(accel) == 2 and all(math.isfinite(a) and a > 0.0 for a in accel)):
            raise ValueError(f"tracking_reference_accel must be None or two positive numbers (planar m/s^2, yaw "
                             f"rad/s^2), got {accel!r}")
        self.cfg = cfg
        self.num_envs = num_envs
        self.device = device
        self.generator = generator
        self.command = torch.zeros(num_envs, 3, device=device)
        # what the tracking rewards follow: the command, or with tracking_reference_accel its rate-limited reference
        self.reference = torch.zeros(num_envs, 3, device=device)
        self.heading_target = torch.zeros(num_envs, device=device)
        self.is_heading_env = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.is_standing_env = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.time_left = torch.zeros(num_envs, device=device)
        self.steps = 0  # the curriculum's clock: policy steps so far

    def _uniform(self, low: float, high: float, n: int) -> torch.Tensor:
        return low + (high - low) * torch.rand(n, generator=self.generator, device=self.device)

    def resample(self, env_mask: torch.Tensor) -> None:
        """New commands for the envs in ``env_mask`` [N] bool (values drawn for all envs, kept where masked, so
        the random stream does not depend on how many envs resample)."""
        c, n = self.cfg, self.num_envs

        def ranged(name):
            low, high = self.current_range(name)
            return self._uniform(low, high, n)

        fresh = torch.stack((ranged("lin_vel_x"), ranged("lin_vel_y"), ranged("ang_vel_z")), dim=-1)
        if c.boundary_command_fraction > 0.0:
            fresh[:, :2] = self._to_boundary(fresh[:, :2])
        heading = self._uniform(*c.heading, n)
        heading_env = torch.rand(n, generator=self.generator, device=self.device) < c.rel_heading_envs
        standing = torch.rand(n, generator=self.generator, device=self.device) < c.rel_standing_envs
        heading_env = heading_env & c.heading_command
        m = env_mask
        self.command = torch.where(m[:, None], fresh, self.command)
        self.heading_target = torch.where(m, heading, self.heading_target)
        self.is_heading_env = torch.where(m, heading_env, self.is_heading_env)
        self.is_standing_env = torch.where(m, standing, self.is_standing_env)
        self.time_left = torch.where(m, torch.full_like(self.time_left, self.resampling_time), self.time_left)

    def _to_boundary(self, planar: torch.Tensor) -> torch.Tensor:
        """A ``boundary_command_fraction`` of the rows of ``planar`` [N, 2] (vx, vy) scaled along their direction to
        U(``boundary_command_scale``) of the distance to the edge of the range box (once the curriculum is done;
        a range that does not contain 0 keeps its draws). Draws for all envs, as :meth:`resample`, and none
        during the curriculum."""
        c, n = self.cfg, self.num_envs
        if self.progress < 1.0:  # no draws before: the curriculum's random stream is that of the uniform commands
            return planar
        pick = torch.rand(n, generator=self.generator, device=self.device) < c.boundary_command_fraction
        length = self._uniform(*c.boundary_command_scale, n)
        (xl, xh), (yl, yh) = c.lin_vel_x, c.lin_vel_y
        if not (xl <= 0.0 <= xh and yl <= 0.0 <= yh):
            return planar
        # distance to the edge along the row's direction, as a multiple of the row: min over the axes of bound / |v|
        upper, lower = planar.new_tensor([xh, yh]), planar.new_tensor([-xl, -yl])
        bound = torch.where(planar >= 0, upper, lower)
        reach = (bound / planar.abs().clamp(min=1e-9)).min(dim=1).values
        scaled = planar * (reach * length)[:, None]
        ok = pick & (planar.abs().max(dim=1).values > 1e-6)
        return torch.where(ok[:, None], scaled, planar)

    @property
    def resampling_time(self) -> float:
        """The resampling period now (s): ``resampling_time``, or ``resampling_time_final`` once the curriculum
        has reached the full ranges."""
        c = self.cfg
        if c.resampling_time_final is not None and self.progress >= 1.0:
            return c.resampling_time_final
        return c.resampling_time

    @property
    def progress(self) -> float:
        """The curriculum's progress in [0, 1] (1 when it is off or done)."""
        c = self.cfg
        if not c.has_curriculum:
            return 1.0
        return min(1.0, self.steps / c.curriculum_steps)

    @property
    def steps_since_done(self) -> int:
        """Policy steps since the curriculum reached the full ranges (all steps when it is off; 0 before the end)."""
        c = self.cfg
        return max(0, self.steps - c.curriculum_steps) if c.has_curriculum else self.steps

    def current_range(self, name: str) -> tuple[float, float]:
        """The range of command ``name`` (``lin_vel_x``, ``lin_vel_y``, ``ang_vel_z``) now: linear from the
        curriculum's initial range (``curriculum_initial_<name>``, else ``curriculum_initial_scale`` x the range)
        to the full range."""
        c = self.cfg
        full = getattr(c, name)
        p = self.progress
        if p >= 1.0:
            return full
        initial = getattr(c, f"curriculum_initial_{name}")
        if initial is None:
            initial = (full[0] * c.curriculum_initial_scale, full[1] * c.curriculum_initial_scale)
        return tuple(i + (f - i) * p for i, f in zip(initial, full))

    def update(self, dt: float, heading: torch.Tensor) -> None:
        """Advance the timers by ``dt`` (s), resample the expired commands, apply heading control at the current
        base ``heading`` [N] (rad), zero the standing envs."""
        self.steps += 1
        self.time_left = self.time_left - dt
        expired = self.time_left <= 0.0
        if bool(expired.any()):
            self.resample(expired)
        c = self.cfg
        if c.heading_command:
            heading = heading.detach()
            error = wrap_to_pi(self.heading_target - heading)
            limit = self.current_range("ang_vel_z")
            wz = (c.heading_control_stiffness * error).clamp(*limit)
            self.command[:, 2] = torch.where(self.is_heading_env, wz, self.command[:, 2])
        self.command = torch.where(self.is_standing_env[:, None], torch.zeros_like(self.command), self.command)
        self._advance_reference(dt)

    def _advance_reference(self, dt: float) -> None:
        """Move the tracking reference towards the command by at most ``tracking_reference_accel`` x ``dt`` (the
        planar part by its norm); without the option, or before the curriculum has reached the full ranges, it is the
        command."""
        accel = self.cfg.tracking_reference_accel
        if accel is None or self.progress < 1.0:
            self.reference = self.command.clone()
            return
        delta = self.command - self.reference
        planar = delta[:, :2]
        norm = torch.linalg.norm(planar, dim=1, keepdim=True)
        planar = planar * (accel[0] * dt / norm.clamp(min=1e-12)).clamp(max=1.0)
        yaw = delta[:, 2:].clamp(-accel[1] * dt, accel[1] * dt)
        self.reference = self.reference + torch.cat((planar, yaw), dim=1)

    def reset_reference(self, env_mask: torch.Tensor, velocity: torch.Tensor) -> None:
        """Start the tracking reference of the envs in ``env_mask`` [N] bool (reset envs) at ``velocity`` [N, 3]
        (vx, vy m/s in the base frame, wz rad/s: the base's at the reset), or at their command without
        ``tracking_reference_accel`` or before the curriculum's end."""
        ramped = self.cfg.tracking_reference_accel is not None and self.progress >= 1.0
        start = velocity.detach().to(self.command.dtype) if ramped else self.command
        self.reference = torch.where(env_mask[:, None], start, self.reference)

    _TENSORS = ("command", "reference", "heading_target", "is_heading_env", "is_standing_env", "time_left")

    def state_dict(self) -> dict:
        state = {k: getattr(self, k).clone() for k in self._TENSORS}
        state["steps"] = self.steps
        return state

    def load_state_dict(self, state: dict) -> None:
        # a checkpoint from before the reference lacks its entry; other entries (of options since removed) are ignored
        for k in self._TENSORS:
            if k in state:
                setattr(self, k, state[k].clone().to(self.device))
        self.steps = state["steps"]

    def load_clock(self, state: dict) -> None:
        """The curriculum's clock from a :meth:`state_dict` of any env count (a run resumed with other envs: the
        episodes start anew, the training schedule goes on where it was)."""
        self.steps = int(state["steps"])
