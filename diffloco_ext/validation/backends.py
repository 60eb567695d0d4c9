"""The validation backend protocol: a batch of ``N`` robots that can be given per-env physical parameters, reset
to given states, driven by joint targets for one policy step, and read back.

Conventions (the simulator's, :mod:`diffloco_ext.sim.model`; MuJoCo's free joint uses the same): ``q`` [N, 7 + n]
= base position (world, m), base quaternion (w, x, y, z) (base -> world), joint angles (rad); ``u`` [N, 6 + n] =
base linear velocity of the base frame's origin (world, m/s), base angular velocity (base frame, rad/s), joint
velocities (rad/s). Joints in the robot description's order (leg by leg), not Isaac Lab's. Tensors are torch
float64 on the CPU. The ground is the plane z = 0, or a generated terrain given to the factory (``terrain``: the
backends of :data:`.backend_registry.TERRAIN_BACKENDS`, its height field as their ground).

Every backend runs the project's drive model: per joint ``tau = clip(k_p (q* - q) - k_d qd, tau_min(qd),
tau_max(qd))`` with the DC-motor envelope of ``robot.actuator`` (``tau_max = clip(S (1 - qd / v), 0, E)``,
``tau_min = clip(S (-1 - qd / v), -E, 0)``; :func:`~.mujoco_replay.dc_motor_pd_torque`), computed at the
engine's own physics step with the joint targets held for the policy step.

A backend provides (duck-typed, :class:`Backend`):

``name`` (str), ``num_envs`` (int), ``policy_dt`` (s)
``set_parameters(params)``
    Per-env physical parameters (:class:`EnvParameters`, arrays [N]) for all envs, effective from the next
    :meth:`step`. The runner calls it once per batch, before the batch's :meth:`reset`; values persist until
    the next call. Semantics below, identical in every backend.
``reset(q, u, env_mask=None)``
    Put the robots of ``env_mask`` ([N] bool, default all) into the states ``q``, ``u`` (rows of other envs are
    ignored). Also called mid-episode to push robots (the same ``q``, a changed base velocity in ``u``), so it
    must not change the parameters nor anything but the state (and the engine's warm-start caches).
``step(joint_target)``
    One policy step (``policy_dt``) holding joint targets [N, n] (rad, description order).
``state() -> (q, u)``
    The states now (copies).
``joint_torque() -> tau``
    [N, n] (N·m, description order): the drive torque applied over the last :meth:`step`, averaged over its
    physics steps (zeros before the first step).
``close()``
    Release the engine's resources (optional).

Contacts and falls are not read from the engine: the runner derives them from the state with the project's
kinematics (:mod:`.robot_kinematics`: foot-sphere heights, collision-capsule gaps), one definition for all
backends.

:class:`EnvParameters` semantics (what a backend must implement):

* ``friction``: the Coulomb coefficient of foot-ground contact. The simulator: ``Model.friction``; MuJoCo:
  the sliding friction of the floor and foot geoms (MuJoCo takes the max of the two: the value itself);
  Isaac Lab: static and dynamic friction of the foot and ground materials (combine mode such that the
  contact's coefficient is the value, e.g. ``"max"`` or ``"multiply"`` with the ground at 1).
* ``payload_kg``: a point mass added to the base at its centre of mass (kg, negative removes mass): the base
  mass changes, its centre of mass and its inertia about it do not. The simulator: ``body_mass[:, 0]``;
  MuJoCo: ``body_mass[base]`` (then ``mj_setConst``); Isaac Lab: the base body's mass (not its inertia).
* ``stiffness_scale``, ``damping_scale``: factors on the drive's PD gains ``k_p``, ``k_d`` (all joints of the
  env); the envelope ``E``, ``S``, ``v`` stays.

Backends are made by name through :mod:`.backend_registry`, with factories of signature
``make_backend(robot, num_envs, *, policy_dt, sim_dt, friction, **options) -> Backend`` (the Isaac Lab factory
``diffloco_ext.isaaclab.validation_backend:make_backend`` also takes ``engine="physx" | "newton"``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Protocol, runtime_checkable

import numpy as np
import torch


@dataclass
class EnvParameters:
    """Per-env physical parameters of a validation batch (float64 arrays [N]; semantics in the module docstring)."""

    friction: np.ndarray  # Coulomb coefficient of foot-ground contact
    payload_kg: np.ndarray  # kg added to the base at its centre of mass
    stiffness_scale: np.ndarray  # factor on the PD k_p
    damping_scale: np.ndarray  # factor on the PD k_d

    @classmethod
    def nominal(cls, num_envs: int, friction: float = 1.0) -> "EnvParameters":
        one = np.ones(num_envs)
        return cls(friction=friction * one, payload_kg=0.0 * one, stiffness_scale=one.copy(), damping_scale=one.copy())

    def __post_init__(self) -> None:
        sizes = set()
        for f in fields(self):
            value = np.asarray(getattr(self, f.name), dtype=np.float64)
            if value.ndim != 1 or not np.all(np.isfinite(value)):
                raise ValueError(f"EnvParameters.{f.name} must be a finite 1-D array [N], got {value!r}")
            setattr(self, f.name, value)
            sizes.add(value.size)
        if len(sizes) != 1:
            lengths = {f.name: getattr(self, f.name).size for f in fields(self)}
            raise ValueError(f"EnvParameters arrays differ in length: {lengths}")
        if (self.friction < 0).any() or (self.stiffness_scale < 0).any() or (self.damping_scale < 0).any():
            raise ValueError("EnvParameters: friction and gain scales must be >= 0")

    @property
    def num_envs(self) -> int:
        return self.friction.size

    def check(self, num_envs: int, robot) -> None:
        """Raise if these parameters do not fit a batch of ``num_envs`` robots ``robot`` (e.g. a payload that
        leaves a non-positive base mass)."""
        if self.num_envs != num_envs:
            raise ValueError(f"EnvParameters for {self.num_envs} envs given to a backend of {num_envs}")
        base = robot.bodies[0].mass
        if (base + self.payload_kg <= 0).any():
            raise ValueError(f"payload {self.payload_kg.min()} kg leaves the base ({base:.2f} kg) without mass")


@runtime_checkable
class Backend(Protocol):
    """What a validation backend provides (see the module docstring for the semantics)."""

    name: str
    num_envs: int
    policy_dt: float

    def set_parameters(self, params: EnvParameters) -> None: ...

    def reset(self, q: torch.Tensor, u: torch.Tensor, env_mask: torch.Tensor | None = None) -> None: ...

    def step(self, joint_target: torch.Tensor) -> None: ...

    def state(self) -> tuple[torch.Tensor, torch.Tensor]: ...

    def joint_torque(self) -> torch.Tensor: ...


def __getattr__(name: str):
    """The backends themselves live in their own modules (kept importable from here)."""
    if name == "SimBackend":
        from .sim_backend import SimBackend

        return SimBackend
    if name == "MujocoBackend":
        from .mujoco_backend import MujocoBackend

        return MujocoBackend
    raise AttributeError(name)
