"""Validation before hardware: replay a policy under hard contact in other simulators (the project's hard mode,
MuJoCo, Isaac Lab), with scenarios, gates, a PASS/FAIL verdict and a report (docs/validation.md).

Modules: :mod:`.backends` (the backend protocol), :mod:`.sim_backend`, :mod:`.mujoco_backend`,
:mod:`.backend_registry`, :mod:`.scenarios` (config files), :mod:`.closed_loop` (episodes), :mod:`.gates`,
:mod:`.policy_io` (policies as deployed), :mod:`.validation_run` (one run), :mod:`.report`, :mod:`.render`,
:mod:`.mujoco_replay` (the drive model in numpy, a single-robot MuJoCo replay).
"""

from .mujoco_replay import MujocoReplay, dc_motor_pd_torque

__all__ = ["MujocoReplay", "dc_motor_pd_torque"]
