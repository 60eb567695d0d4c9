"""Validation before hardware: replay under hard contact in other simulators (MuJoCo now; Isaac Lab later)."""

from .mujoco_replay import MujocoReplay, dc_motor_pd_torque

__all__ = ["MujocoReplay", "dc_motor_pd_torque"]
