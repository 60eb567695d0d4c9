"""MuJoCo C as a validation backend: the MJCF exported from the same robot description, the project's drive
model in the loop, batched over envs and stepped on several threads.

Each policy step is ``steps_per_policy_step`` MuJoCo steps of ``policy_dt / steps_per_policy_step``. Before
every MuJoCo step the drive torques of all envs are computed at once in numpy from the envs' states
(:func:`~.mujoco_replay.dc_motor_pd_torque`, per-env gains) and the step of all envs is one call of MuJoCo's
``rollout`` (C++, a thread pool of ``threads`` threads, the GIL released), so the Python overhead is per batch,
not per env. The states live in numpy as MuJoCo's ``mjSTATE_FULLPHYSICS`` vectors, one per env; the solver's
warm start is off (a state vector does not carry it, and with it on, the start guess would depend on which env a
thread stepped before: results would depend on the thread schedule), so every step's constraint solve starts from
the unconstrained accelerations (it converges to MuJoCo's tolerance either way).

``contact_time_constant`` sets every geom's ``solref`` time constant (s; MuJoCo's default 0.02): the registry's
``mujoco-soft`` runs at 0.04, a ground twice as soft (a standing ANYmal D's feet sink deeper and it bounces more),
a check that a policy's gait does not hold on one ground only.

Per-env parameters (:class:`~.backends.EnvParameters`): one ``MjModel`` copy per env; ``friction`` sets the
sliding friction of the floor and the foot geoms, ``payload_kg`` the base's ``body_mass`` (then
``mj_setConst``), the gain scales the drive's ``k_p``, ``k_d``.
"""

from __future__ import annotations

import copy
import os

import mujoco
import numpy as np
import torch
from mujoco import rollout

from ..assets.mjcf_exporter import to_mjmodel
from ..assets.robot_description import RobotDescription
from .backends import EnvParameters
from .mujoco_replay import dc_motor_pd_torque

STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS


def _state_offset(model: mujoco.MjModel, component: mujoco.mjtState) -> int:
    """Offset of ``component`` in a ``STATE_SPEC`` vector (components are concatenated in bit order)."""
    lower = int(STATE_SPEC) & (int(component) - 1)
    return mujoco.mj_stateSize(model, lower)


class MujocoBackend:
    """``num_envs`` robots in MuJoCo (see the module docstring); ``threads`` defaults to the CPU count (max 8)."""

    def __init__(self, robot: RobotDescription, num_envs: int, policy_dt: float = 0.02,
                 steps_per_policy_step: int = 8, friction: float = 1.0, threads: int | None = None,
                 name: str = "mujoco", contact_time_constant: float | None = None):
        if robot.actuator is None:
            raise ValueError(f"robot '{robot.name}' has no drive model")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.name = name
        self.robot = robot
        self.num_envs = num_envs
        self.policy_dt = policy_dt
        self.substeps = int(steps_per_policy_step)
        self.threads = int(threads or min(8, os.cpu_count() or 1))
        self.model = to_mjmodel(robot, actuators="motor", timestep=policy_dt / self.substeps, friction=friction)
        self.model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)
        if contact_time_constant is not None:
            # MuJoCo clamps a time constant below two steps to two steps (mjtDisableBit.mjDSBL_REFSAFE): refuse it
            if not contact_time_constant >= 2 * self.model.opt.timestep:
                raise ValueError(f"contact_time_constant {contact_time_constant!r} s is below two MuJoCo steps "
                                 f"({2 * self.model.opt.timestep} s), where MuJoCo would silently clamp it")
            self.model.geom_solref[:, 0] = contact_time_constant  # every geom: a pair mixes its two geoms' values
        self.models = [copy.copy(self.model) for _ in range(num_envs)]
        self._scratch = mujoco.MjData(self.model)
        self._friction_geoms = [self.model.geom("floor").id] + [self.model.geom(f.name).id for f in robot.feet]
        self._base = self.model.body(robot.bodies[0].name).id
        self._base_mass = float(self.model.body_mass[self._base])
        nq, nv = self.model.nq, self.model.nv
        self._qpos = slice(_state_offset(self.model, mujoco.mjtState.mjSTATE_QPOS),
                           _state_offset(self.model, mujoco.mjtState.mjSTATE_QPOS) + nq)
        self._qvel = slice(_state_offset(self.model, mujoco.mjtState.mjSTATE_QVEL),
                           _state_offset(self.model, mujoco.mjtState.mjSTATE_QVEL) + nv)
        mujoco.mj_resetData(self.model, self._scratch)
        initial = np.empty(mujoco.mj_stateSize(self.model, STATE_SPEC))
        mujoco.mj_getState(self.model, self._scratch, initial, STATE_SPEC)
        self._initial = initial
        self.states = np.tile(initial, (num_envs, 1))
        self._out = np.empty((num_envs, 1, initial.size))
        self._ctrl = np.zeros((num_envs, 1, self.model.nu))
        self._kp = np.full((num_envs, 1), robot.actuator.stiffness)
        self._kd = np.full((num_envs, 1), robot.actuator.damping)
        self._torque = np.zeros((num_envs, robot.num_joints))
        self._pool = rollout.Rollout(nthread=self.threads)
        self._datas = [mujoco.MjData(self.model) for _ in range(self.threads)]

    def set_parameters(self, params: EnvParameters) -> None:
        params.check(self.num_envs, self.robot)
        for e, m in enumerate(self.models):
            m.geom_friction[self._friction_geoms, 0] = params.friction[e]
            m.body_mass[self._base] = self._base_mass + params.payload_kg[e]
            mujoco.mj_setConst(m, self._scratch)
        self._kp = self.robot.actuator.stiffness * params.stiffness_scale[:, None]
        self._kd = self.robot.actuator.damping * params.damping_scale[:, None]

    def reset(self, q, u, env_mask=None) -> None:
        q, u = q.detach().double().numpy(), u.detach().double().numpy()
        mask = np.ones(self.num_envs, dtype=bool) if env_mask is None else np.asarray(env_mask, dtype=bool)
        fresh = np.tile(self._initial, (self.num_envs, 1))
        fresh[:, self._qpos] = q
        fresh[:, self._qvel] = u
        self.states[mask] = fresh[mask]

    def step(self, joint_target) -> None:
        target = joint_target.detach().double().numpy()
        act = self.robot.actuator
        total = np.zeros_like(self._torque)
        for _ in range(self.substeps):
            qpos, qvel = self.states[:, self._qpos], self.states[:, self._qvel]
            tau = dc_motor_pd_torque(act, target, qpos[:, 7:], qvel[:, 6:], stiffness=self._kp, damping=self._kd)
            self._ctrl[:, 0] = tau
            total += tau
            self._pool.rollout(self.models, self._datas, self.states, self._ctrl, nstep=1, state=self._out,
                               skip_checks=True)
            self.states[:] = self._out[:, 0]
        self._torque = total / self.substeps

    def state(self):
        return (torch.tensor(self.states[:, self._qpos].copy()), torch.tensor(self.states[:, self._qvel].copy()))

    def joint_torque(self) -> torch.Tensor:
        return torch.tensor(self._torque.copy())

    def close(self) -> None:
        self._pool.close()

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            try:
                pool.close()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass


def make_backend(robot: RobotDescription, num_envs: int, *, policy_dt: float, sim_dt: float, friction: float = 1.0,
                 threads: int | None = None, name: str = "mujoco",
                 contact_time_constant: float | None = None) -> MujocoBackend:
    """The registry's factory: ``policy_dt / sim_dt`` MuJoCo steps per policy step (must divide);
    ``contact_time_constant`` (s): the contacts' ``solref`` time constant (None: MuJoCo's default, 0.02 s)."""
    substeps = round(policy_dt / sim_dt)
    if substeps < 1 or abs(substeps * sim_dt - policy_dt) > 1e-9:
        raise ValueError(f"policy_dt {policy_dt} s is not a multiple of sim_dt {sim_dt} s")
    return MujocoBackend(robot, num_envs, policy_dt=policy_dt, steps_per_policy_step=substeps, friction=friction,
                         threads=threads, name=name, contact_time_constant=contact_time_constant)


def benchmark(num_envs: int = 64, steps: int = 50, threads: tuple[int, ...] = (1, 2), robot: str = "anymal_d"):
    """Wall-clock seconds per policy step of a trotting batch for each thread count, and a per-env Python loop of
    ``mj_step`` calls (the previous implementation) for comparison. Returns ``{label: seconds per policy step}``."""
    import math
    import time

    from ..assets import get_robot

    desc = get_robot(robot)
    default = torch.tensor(desc.default_joint_positions())
    q = torch.zeros(num_envs, desc.num_joints + 7, dtype=torch.float64)
    q[:, 2], q[:, 3], q[:, 7:] = desc.default_base_height - 0.04, 1.0, default
    u = torch.zeros(num_envs, desc.num_joints + 6, dtype=torch.float64)

    def target(t):
        return (default + 0.3 * math.sin(2 * math.pi * t / 30)).repeat(num_envs, 1).double()

    results = {}
    for n in threads:
        backend = MujocoBackend(desc, num_envs, threads=n)
        backend.reset(q, u)
        backend.step(target(0))
        start = time.perf_counter()
        for t in range(steps):
            backend.step(target(t))
        results[f"rollout, {n} thread(s)"] = (time.perf_counter() - start) / steps
        backend.close()
    backend = MujocoBackend(desc, num_envs, threads=1)
    datas = [mujoco.MjData(m) for m in backend.models]
    for d in datas:
        d.qpos[:], d.qvel[:] = q[0].numpy(), 0.0
    start = time.perf_counter()
    for t in range(steps):
        tq = target(t).numpy()
        for _ in range(backend.substeps):
            for e, d in enumerate(datas):
                d.ctrl[:] = dc_motor_pd_torque(desc.actuator, tq[e], d.qpos[7:], d.qvel[6:])
                mujoco.mj_step(backend.models[e], d)
    results["python loop over envs"] = (time.perf_counter() - start) / steps
    return results


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="time the batched MuJoCo backend (threads) against a Python loop")
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=50, help="policy steps (8 MuJoCo steps each)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    torch.set_num_threads(1)
    timings = benchmark(args.envs, args.steps, tuple(args.threads))
    base = timings[f"rollout, {args.threads[0]} thread(s)"]
    for label, seconds in timings.items():
        per_env_step = seconds / (args.envs * 8) * 1e6
        print(f"{label:24s} {seconds * 1e3:7.2f} ms per policy step of {args.envs} envs ({per_env_step:5.1f} us per "
              f"env and MuJoCo step), {base / seconds:4.2f}x the first")
