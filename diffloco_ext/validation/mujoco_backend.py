"""MuJoCo C as a validation backend: the batched engine of :mod:`diffloco_ext.sim.mujoco_engine` (the MJCF
exported from the same robot description, the project's drive model at every MuJoCo step, all envs in one
``rollout`` call on several threads) behind the validation's backend protocol (:mod:`.backends`).

``terrain`` (a generated terrain) replaces the floor with its height field, and the robot's collision capsules
collide with it (:mod:`diffloco_ext.sim.mujoco_engine`). ``contact_time_constant`` sets every geom's ``solref`` time
constant (s; MuJoCo's default 0.02): the registry's
``mujoco-soft`` runs at 0.04, a ground twice as soft (a standing ANYmal D's feet sink deeper and it bounces more),
a check that a policy's gait does not hold on one ground only.

Per-env parameters (:class:`~.backends.EnvParameters`): ``friction`` the floor's and the feet's sliding friction,
``payload_kg`` added to the base's ``body_mass``, the gain scales on the drive's ``k_p``, ``k_d``.
"""

from __future__ import annotations

import numpy as np
import torch

from ..assets.robot_description import RobotDescription
from ..sim.mujoco_engine import MujocoEngine
from .backends import EnvParameters


class MujocoBackend:
    """``num_envs`` robots in MuJoCo (see the module docstring); ``threads`` defaults to the CPU count (max 8)."""

    def __init__(self, robot: RobotDescription, num_envs: int, policy_dt: float = 0.02,
                 steps_per_policy_step: int = 8, friction: float = 1.0, threads: int | None = None,
                 name: str = "mujoco", contact_time_constant: float | None = None, terrain=None):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.name = name
        self.robot = robot
        self.num_envs = num_envs
        self.policy_dt = policy_dt
        self.engine = MujocoEngine(robot, num_envs, policy_dt=policy_dt,
                                   steps_per_policy_step=int(steps_per_policy_step), friction=friction,
                                   threads=threads, contact_time_constant=contact_time_constant,
                                   terrain=None if terrain is None else (terrain.heights, terrain.origin_xy,
                                                                         terrain.cfg.resolution))
        self.substeps, self.threads = self.engine.substeps, self.engine.threads
        self.model, self.models = self.engine.model, self.engine.models
        self._q = np.tile(self.model.qpos0, (num_envs, 1))
        self._u = np.zeros((num_envs, self.model.nv))
        self._torque = np.zeros((num_envs, robot.num_joints))

    def set_parameters(self, params: EnvParameters) -> None:
        params.check(self.num_envs, self.robot)
        act = self.robot.actuator
        self.engine.set_parameters(friction=params.friction, base_mass=self.engine.base_mass + params.payload_kg,
                                   stiffness=act.stiffness * params.stiffness_scale[:, None],
                                   damping=act.damping * params.damping_scale[:, None])

    def reset(self, q, u, env_mask=None) -> None:
        q, u = q.detach().double().numpy(), u.detach().double().numpy()
        mask = np.ones(self.num_envs, dtype=bool) if env_mask is None else np.asarray(env_mask, dtype=bool)
        self._q[mask], self._u[mask] = q[mask], u[mask]

    def step(self, joint_target) -> None:
        out = self.engine.step(self._q, self._u, joint_target.detach().double().numpy())
        self._q, self._u, self._torque = out.q, out.u, out.joint_torque

    def state(self):
        return torch.tensor(self._q.copy()), torch.tensor(self._u.copy())

    def joint_torque(self) -> torch.Tensor:
        return torch.tensor(self._torque.copy())

    def close(self) -> None:
        self.engine.close()


def make_backend(robot: RobotDescription, num_envs: int, *, policy_dt: float, sim_dt: float, friction: float = 1.0,
                 threads: int | None = None, name: str = "mujoco",
                 contact_time_constant: float | None = None, terrain=None) -> MujocoBackend:
    """The registry's factory: ``policy_dt / sim_dt`` MuJoCo steps per policy step (must divide);
    ``contact_time_constant`` (s): the contacts' ``solref`` time constant (None: MuJoCo's default, 0.02 s);
    ``terrain``: a generated terrain as the ground (its height field; the collision capsules then collide too)."""
    substeps = round(policy_dt / sim_dt)
    if substeps < 1 or abs(substeps * sim_dt - policy_dt) > 1e-9:
        raise ValueError(f"policy_dt {policy_dt} s is not a multiple of sim_dt {sim_dt} s")
    return MujocoBackend(robot, num_envs, policy_dt=policy_dt, steps_per_policy_step=substeps, friction=friction,
                         threads=threads, name=name, contact_time_constant=contact_time_constant, terrain=terrain)


def benchmark(num_envs: int = 64, steps: int = 50, threads: tuple[int, ...] = (1, 2), robot: str = "anymal_d"):
    """Wall-clock seconds per policy step of a trotting batch for each thread count, and a per-env Python loop of
    ``mj_step`` calls (the previous implementation) for comparison. Returns ``{label: seconds per policy step}``."""
    import math
    import time

    import mujoco

    from ..assets import get_robot
    from .mujoco_replay import dc_motor_pd_torque

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
