"""MuJoCo C as an accurate, non-differentiable physics engine for a batch of robots: the MJCF exported from the same
robot description, the project's drive model in the loop, all envs stepped by one call of MuJoCo's ``rollout``.

Used twice: as the forward physics of the aligned step (:mod:`.aligned_step`, Song et al.'s accurate simulator)
and inside the validation's MuJoCo backend (:mod:`diffloco_ext.validation.mujoco_backend`).

One :meth:`MujocoEngine.step` is one policy step from given states: ``steps_per_policy_step`` MuJoCo steps of
``policy_dt / steps_per_policy_step`` with the joint targets held. Before every MuJoCo step the drive torques of
all envs are one numpy expression (:meth:`~diffloco_ext.assets.robot_description.ActuatorParams.pd_torque`:
PD inside the DC-motor envelope, per-env gains) and the step of all envs one ``rollout`` call (C++, a pool of
``threads`` threads, the GIL released). The engine keeps no state between calls: each call builds MuJoCo's
``mjSTATE_FULLPHYSICS`` vectors from ``(q, u)`` (float64), so its result is a function of its arguments only. The
solver's warm start is off (a state vector does not carry it; with it on, results would depend on the thread
schedule).

Conventions (the simulator's, which are MuJoCo's free-joint conventions): ``q`` [N, 7 + n] = base position
(world, m), quaternion (w, x, y, z) (base -> world), joint angles (rad, description order); ``u`` [N, 6 + n] =
base linear velocity (world, m/s), angular velocity (base frame, rad/s), joint velocities (rad/s).

Divergence: an env whose state leaves the finite numbers, exceeds ``max_speed`` (m/s, rad/s) or ``max_distance``
(m, rad), or that MuJoCo reset after a bad acceleration (its ``mjWARN_BADQACC`` auto-reset to ``qpos0``) is
flagged in :attr:`EngineStep.diverged` and returned at its input state (held, as the simulator's divergence guard
does); MuJoCo's warning counters are cleared after each step.

Ground: the plane z = 0, or with ``terrain`` (``(heights [nx, ny], origin_xy, resolution)``, the simulator's
height-field layout, e.g. a generated terrain's arrays) MuJoCo's ``hfield`` of those heights, and then the robot's
collision capsules (base, thighs, shanks) collide with it too (:func:`~..assets.mjcf_exporter.to_mjcf`'s
``body_collisions``): on stairs a shank can hit an edge.

Per-env parameters (:meth:`MujocoEngine.set_parameters`): one ``MjModel`` copy per env; ``friction`` sets the
sliding friction of the ground and the foot geoms (MuJoCo combines a pair by max: the value itself), the base's
mass, centre of mass (base frame) and inertia (a scale on the principal moments) the base body's, then
``mj_setConst``; the drive gains ``k_p``, ``k_d`` per env and joint.
"""

from __future__ import annotations

import copy
import os
from typing import NamedTuple

import mujoco
import numpy as np
from mujoco import rollout

from ..assets.mjcf_exporter import to_mjmodel
from ..assets.robot_description import RobotDescription

STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS


def _state_offset(model: mujoco.MjModel, component: mujoco.mjtState) -> int:
    """Offset of ``component`` in a ``STATE_SPEC`` vector (components are concatenated in bit order)."""
    lower = int(STATE_SPEC) & (int(component) - 1)
    return mujoco.mj_stateSize(model, lower)


class EngineStep(NamedTuple):
    """What one policy step of the engine gives (numpy, float64)."""

    q: np.ndarray  # [N, nq] at the end of the policy step (the input state where diverged)
    u: np.ndarray  # [N, nv]
    joint_torque: np.ndarray  # [N, n] drive torque applied, averaged over the MuJoCo steps (N m)
    diverged: np.ndarray  # [N] bool


class MujocoEngine:
    """``num_envs`` copies of ``robot`` in MuJoCo (see the module docstring); ``threads`` defaults to the CPU count
    (at most 8); ``contact_time_constant`` (s) sets every geom's ``solref`` time constant (None: MuJoCo's 0.02);
    ``terrain``: a height field instead of the floor (module docstring)."""

    def __init__(self, robot: RobotDescription, num_envs: int, policy_dt: float = 0.02,
                 steps_per_policy_step: int = 8, friction: float = 1.0, threads: int | None = None,
                 contact_time_constant: float | None = None, max_speed: float = 1.0e3,
                 max_distance: float = 1.0e4, terrain: tuple | None = None):
        if robot.actuator is None:
            raise ValueError(f"robot '{robot.name}' has no drive model")
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if isinstance(steps_per_policy_step, bool) or not isinstance(steps_per_policy_step, int) \
                or steps_per_policy_step < 1:
            raise ValueError(f"steps_per_policy_step must be an integer >= 1, got {steps_per_policy_step!r}")
        self.robot = robot
        self.num_envs = num_envs
        self.policy_dt = float(policy_dt)
        self.substeps = steps_per_policy_step
        self.threads = int(threads or min(8, os.cpu_count() or 1))
        self.max_speed, self.max_distance = float(max_speed), float(max_distance)
        self.terrain = terrain
        self.model = to_mjmodel(robot, terrain, actuators="motor", timestep=self.policy_dt / self.substeps,
                                friction=friction, body_collisions=terrain is not None)
        self.model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)
        if contact_time_constant is not None:
            # MuJoCo clamps a time constant below two steps to two steps (mjtDisableBit.mjDSBL_REFSAFE): refuse it
            if not contact_time_constant >= 2 * self.model.opt.timestep:
                raise ValueError(f"contact_time_constant {contact_time_constant!r} s is below two MuJoCo steps "
                                 f"({2 * self.model.opt.timestep} s), where MuJoCo would silently clamp it")
            self.model.geom_solref[:, 0] = contact_time_constant  # every geom: a pair mixes its two geoms' values
        self.models = [copy.copy(self.model) for _ in range(num_envs)]
        self._scratch = mujoco.MjData(self.model)
        ground = self.model.geom("floor" if terrain is None else "terrain").id
        self._friction_geoms = [ground] + [self.model.geom(f.name).id for f in robot.feet]
        self.base_body = self.model.body(robot.bodies[0].name).id
        #: the base body's nominal mass (kg), centre of mass (base frame, m) and principal inertia (kg m^2)
        self.base_mass = float(self.model.body_mass[self.base_body])
        self.base_com = self.model.body_ipos[self.base_body].copy()
        self.base_inertia = self.model.body_inertia[self.base_body].copy()
        nq, nv = self.model.nq, self.model.nv
        q0 = _state_offset(self.model, mujoco.mjtState.mjSTATE_QPOS)
        v0 = _state_offset(self.model, mujoco.mjtState.mjSTATE_QVEL)
        self._qpos, self._qvel = slice(q0, q0 + nq), slice(v0, v0 + nv)
        mujoco.mj_resetData(self.model, self._scratch)
        self._initial = np.empty(mujoco.mj_stateSize(self.model, STATE_SPEC))
        mujoco.mj_getState(self.model, self._scratch, self._initial, STATE_SPEC)
        self._states = np.tile(self._initial, (num_envs, 1))
        self._out = np.empty((num_envs, 1, self._initial.size))
        self._ctrl = np.zeros((num_envs, 1, self.model.nu))
        n = robot.num_joints
        self.stiffness = np.full((num_envs, n), robot.actuator.stiffness)
        self.damping = np.full((num_envs, n), robot.actuator.damping)
        self._pool = rollout.Rollout(nthread=self.threads)
        self._datas = [mujoco.MjData(self.model) for _ in range(self.threads)]
        self.diverged_total = 0

    @property
    def nq(self) -> int:
        return self.model.nq

    @property
    def nv(self) -> int:
        return self.model.nv

    def set_parameters(self, env_mask: np.ndarray | None = None, *, friction=None, base_mass=None, base_com=None,
                       base_inertia_scale=None, stiffness=None, damping=None) -> None:
        """Per-env parameters of the envs in ``env_mask`` ([N] bool, default all) from the next :meth:`step`;
        each given value is an array with the envs as its first axis ([N], [N, 3] for ``base_com``, [N, 1] or
        [N, n] for the gains): ``friction`` (Coulomb coefficient), ``base_mass`` (kg), ``base_com`` (base frame,
        m), ``base_inertia_scale`` (factor on the nominal principal moments), ``stiffness``, ``damping`` (the
        drive's k_p in N m/rad, k_d in N m s/rad). Values not given stay."""
        N = self.num_envs
        mask = np.ones(N, dtype=bool) if env_mask is None else np.asarray(env_mask, dtype=bool).reshape(N)

        def rows(name, value, tail=()):
            try:
                a = np.broadcast_to(np.asarray(value, dtype=np.float64), (N,) + tail)
            except ValueError:
                raise ValueError(f"MujocoEngine.set_parameters: {name} of shape {np.shape(value)} does not fit "
                                 f"{(N,) + tail}") from None
            if not np.all(np.isfinite(a)):
                raise ValueError(f"MujocoEngine.set_parameters: {name} has non-finite values")
            return a

        n = self.robot.num_joints
        if stiffness is not None:
            self.stiffness = np.where(mask[:, None], rows("stiffness", stiffness, (n,)), self.stiffness)
        if damping is not None:
            self.damping = np.where(mask[:, None], rows("damping", damping, (n,)), self.damping)
        values = {k: v for k, v in (("friction", friction), ("base_mass", base_mass), ("base_com", base_com),
                                    ("base_inertia_scale", base_inertia_scale)) if v is not None}
        if not values:
            return
        tails = {"friction": (), "base_mass": (), "base_com": (3,), "base_inertia_scale": ()}
        arrays = {k: rows(k, v, tails[k]) for k, v in values.items()}
        if "base_mass" in arrays and (arrays["base_mass"][mask] <= 0).any():
            raise ValueError(f"MujocoEngine.set_parameters: base_mass must be > 0, got {arrays['base_mass'].min()}")
        b = self.base_body
        for e in np.flatnonzero(mask):
            m = self.models[e]
            if "friction" in arrays:
                m.geom_friction[self._friction_geoms, 0] = arrays["friction"][e]
            if "base_mass" in arrays:
                m.body_mass[b] = arrays["base_mass"][e]
            if "base_com" in arrays:
                m.body_ipos[b] = arrays["base_com"][e]
            if "base_inertia_scale" in arrays:
                m.body_inertia[b] = self.base_inertia * arrays["base_inertia_scale"][e]
            if {"base_mass", "base_com", "base_inertia_scale"} & arrays.keys():
                mujoco.mj_setConst(m, self._scratch)

    def step(self, q: np.ndarray, u: np.ndarray, joint_target: np.ndarray) -> EngineStep:
        """One policy step of every env from ``(q, u)`` holding ``joint_target`` [N, n] (rad, description order)."""
        N, act = self.num_envs, self.robot.actuator
        q = np.asarray(q, dtype=np.float64)
        u = np.asarray(u, dtype=np.float64)
        target = np.asarray(joint_target, dtype=np.float64)
        if q.shape != (N, self.nq) or u.shape != (N, self.nv) or target.shape != (N, self.robot.num_joints):
            raise ValueError(f"MujocoEngine.step: expected q {(N, self.nq)}, u {(N, self.nv)}, joint_target "
                             f"{(N, self.robot.num_joints)}; got {q.shape}, {u.shape}, {target.shape}")
        states = self._states
        states[:] = self._initial
        states[:, self._qpos] = q
        states[:, self._qvel] = u
        total = np.zeros((N, self.robot.num_joints))
        diverged = ~(np.isfinite(q).all(axis=1) & np.isfinite(u).all(axis=1))
        for _ in range(self.substeps):
            qpos, qvel = states[:, self._qpos], states[:, self._qvel]
            tau = act.pd_torque(target, qpos[:, 7:], qvel[:, 6:], stiffness=self.stiffness, damping=self.damping)
            tau = np.where(diverged[:, None], 0.0, tau)
            self._ctrl[:, 0] = tau
            total += tau
            self._pool.rollout(self.models, self._datas, states, self._ctrl, nstep=1, state=self._out,
                               skip_checks=True)
            states[:] = self._out[:, 0]
            diverged |= self._diverged(states)
        q_out, u_out = states[:, self._qpos].copy(), states[:, self._qvel].copy()
        q_out[diverged], u_out[diverged] = q[diverged], u[diverged]
        self.diverged_total += int(diverged.sum())
        return EngineStep(q_out, u_out, total / self.substeps, diverged)

    def _diverged(self, states: np.ndarray) -> np.ndarray:
        qpos, qvel = states[:, self._qpos], states[:, self._qvel]
        bad = ~(np.isfinite(qpos).all(axis=1) & np.isfinite(qvel).all(axis=1))
        with np.errstate(invalid="ignore"):
            bad |= (np.abs(qvel) > self.max_speed).any(axis=1) | (np.abs(qpos) > self.max_distance).any(axis=1)
        warned = False
        for d in self._datas:
            warning = d.warning[int(mujoco.mjtWarning.mjWARN_BADQACC)]
            if warning.number:
                warned = True
                warning.number = 0
        if warned:  # MuJoCo reset those envs to qpos0 at rest: find them
            bad |= (qpos == self.model.qpos0).all(axis=1) & (qvel == 0.0).all(axis=1)
        return bad

    def close(self) -> None:
        self._pool.close()

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            try:
                pool.close()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass
