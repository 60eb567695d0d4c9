"""Closed-loop episodes of a velocity-tracking policy on a validation backend, with the task's own conventions.

The task gives (:class:`TaskInterface`, from the registered task's config): the observation function
(:func:`~diffloco_ext.tasks.velocity.observations.policy_observation`, no noise), the joint order and action
scale (``target = default + scale * action``, Isaac Lab's joint order), the command generator
(:class:`~diffloco_ext.tasks.velocity.commands.VelocityCommand`, for random commands), the reset height and the
policy step. The policy is called as deployed: ``actions = policy(obs)``, ``obs`` [N, 48] float32 (Isaac Lab's flat
interface; [N, 235] with the rough interface's height scan of the ground the backend runs on, flat or a generated
terrain; + 2 with the gait clock).

Episodes of several scenarios and seeds are packed into one batch of the backend's envs (:func:`run_batch`);
each env follows its own scenario: commands (a piecewise-constant schedule, or the task's random commands with
heading control), per-env parameters (:class:`~.backends.EnvParameters`), pushes, observation latency. Random
draws (initial yaw, commands, push times and kicks) come from one generator per (scenario, seed) and batch, seeded
with the index of the group's first episode (a (scenario, seed) with more episodes than a batch holds goes on with new
draws in the next batch, not with the first batch's again), so an episode's randomness does not depend on the backend.

On generated terrain (scenarios with a ``terrain``: :mod:`.terrain_scenarios`) each episode starts on its tile's
origin. Per step and env the gate quantities (:mod:`.gates`) are accumulated (at the end, whether the episode got
stuck), and the first episode of each scenario (its first seed) is recorded as a trace for the figures.
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import torch

from ..assets import get_robot
from ..assets.robot_description import RobotDescription
from ..tasks import registry
from ..tasks.robot_state import BaseState, yaw_quat
from ..tasks.velocity.commands import VelocityCommand
from ..tasks.velocity.height_scan import CLIP as SCAN_CLIP, HeightGrid, height_scan
from ..tasks.velocity.observations import gait_clock_observation, num_policy_observations, policy_observation
from .backends import EnvParameters
from .gait_analysis import LEGS, measure_gait
from .gates import MetricSums
from .robot_kinematics import RobotKinematics
from .scenarios import Scenario, Settings
from .terrain_scenarios import episode_origins, stuck

TRACE_KEYS = ("time", "command", "lin_vel_b", "ang_vel_b", "base_pos", "roll_pitch", "joint_pos", "joint_vel",
              "joint_target", "joint_torque", "foot_height", "stance", "q", "alive")


@dataclass
class TaskInterface:
    """What validation takes from a registered velocity task (one definition: its config and observation code)."""

    task: str
    env_cfg: object
    robot: RobotDescription
    action_scale: float
    reset_height: float
    policy_dt: float
    to_isaaclab: torch.Tensor  # [n] long: x_isaaclab = x_sim[:, to_isaaclab]
    to_sim: torch.Tensor  # [n] long: the inverse permutation
    default_sim: torch.Tensor  # [n] float64, description order (rad)
    default_il: torch.Tensor  # [n] float64, Isaac Lab order
    base_com: torch.Tensor  # [3] float64, base frame (m): the nominal base centre of mass
    num_obs: int
    num_actions: int

    @property
    def gait_clock(self) -> bool:
        """Whether the policy reads the gait clock after the 48 (the task's ``gait_clock``)."""
        return bool(getattr(self.env_cfg, "gait_clock", False))

    @property
    def height_scan(self) -> bool:
        """Whether the policy reads the rough interface's height scan after the 48 (a task with a terrain)."""
        return getattr(self.env_cfg, "terrain", None) is not None

    @property
    def gait_period(self) -> float:
        """The gait clock's period (s)."""
        return float(self.env_cfg.gait.period)

    @classmethod
    def from_task(cls, task: str) -> "TaskInterface":
        cfg = registry.load_play_cfg(task)
        if not hasattr(cfg, "commands") or not hasattr(cfg, "actions"):
            raise ValueError(f"task '{task}' is not a velocity-tracking task (no commands/actions config)")
        robot = get_robot(cfg.robot)
        to_il = torch.as_tensor(robot.isaaclab_permutation(), dtype=torch.long)
        default = torch.as_tensor(robot.default_joint_positions(), dtype=torch.float64)
        return cls(task=task, env_cfg=cfg, robot=robot, action_scale=float(cfg.actions.scale),
                   reset_height=float(cfg.reset.height), policy_dt=float(cfg.sim.policy_dt), to_isaaclab=to_il,
                   to_sim=torch.argsort(to_il), default_sim=default, default_il=default[to_il],
                   base_com=torch.as_tensor(np.asarray(robot.bodies[0].com, dtype=np.float64)),
                   num_obs=num_policy_observations(cfg), num_actions=robot.num_joints)


@dataclass
class EpisodeSpec:
    """One episode to run: scenario, seed, episode index within the (scenario, seed), whether it is traced."""

    scenario: Scenario
    seed: int
    index: int
    trace: bool

    @property
    def key(self) -> tuple[str, int]:
        return self.scenario.name, self.seed


@dataclass
class BatchResult:
    episodes: list[tuple[EpisodeSpec, dict]]  # (spec, its MetricSums row)
    traces: dict[str, dict[str, np.ndarray]]  # scenario name -> trace arrays [T, ...]
    observations: list[torch.Tensor] = field(default_factory=list)  # recorded policy inputs (float32)
    steps: int = 0


def plan_episodes(scenarios: list[Scenario]) -> list[EpisodeSpec]:
    """Every episode of every scenario and seed (the first of each scenario is traced)."""
    return [EpisodeSpec(s, seed, i, trace=(k == 0 and i == 0))
            for s in scenarios for k, seed in enumerate(s.seeds) for i in range(s.episodes)]


def pack_batches(specs: list[EpisodeSpec], max_envs: int) -> list[list[EpisodeSpec]]:
    """Batches of at most ``max_envs`` episodes, longest first (episodes of a batch run as long as its longest)."""
    order = sorted(specs, key=lambda s: -s.scenario.duration_s)
    return [order[i:i + max_envs] for i in range(0, len(order), max_envs)]


def batch_steps(batch: list[EpisodeSpec], policy_dt: float) -> int:
    return int(round(max(s.scenario.duration_s for s in batch) / policy_dt))


def _generator(name: str, seed: int, first_index: int = 0) -> torch.Generator:
    """The draws of the episodes ``first_index, ...`` of (scenario ``name``, ``seed``) that one batch runs."""
    return torch.Generator().manual_seed((int(seed) * 1_000_003 + zlib.crc32(name.encode())
                                          + int(first_index) * 998_244_353) % (2 ** 63))


def _uniform(gen: torch.Generator, lo: float, hi: float, *shape) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(*shape, generator=gen, dtype=torch.float64)


def roll_pitch(quat: torch.Tensor) -> torch.Tensor:
    """Roll and pitch (rad) [N, 2] of base quaternions (w, x, y, z) (ZYX Euler angles)."""
    w, x, y, z = quat.unbind(-1)
    roll = torch.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = torch.asin((2 * (w * y - z * x)).clamp(-1.0, 1.0))
    return torch.stack((roll, pitch), dim=-1)


class _Group:
    """The envs of one (scenario, seed) in a batch: their generator, commands and push timers."""

    def __init__(self, scenario: Scenario, seed: int, envs: list[int], task_commands, first_index: int = 0):
        self.scenario = scenario
        self.envs = torch.as_tensor(envs, dtype=torch.long)
        self.gen = _generator(scenario.name, seed, first_index)
        n = len(envs)
        self.yaw = (_uniform(self.gen, -np.pi, np.pi, n) if scenario.initial_yaw is None
                    else torch.full((n,), scenario.initial_yaw, dtype=torch.float64))
        self.commands = None
        if scenario.schedule is None:
            self.commands = VelocityCommand(scenario.commands_cfg(task_commands), n, torch.device("cpu"), self.gen)
            self.commands.resample(torch.ones(n, dtype=torch.bool))
        self.next_push = None
        if scenario.push is not None:
            self.next_push = _uniform(self.gen, *scenario.push.interval_s, n)

    def command(self, t: float, heading: torch.Tensor, dt: float) -> torch.Tensor:
        if self.commands is None:
            return torch.as_tensor(self.scenario.command_at(t), dtype=torch.float64).expand(len(self.envs), 3)
        self.commands.update(dt, heading[self.envs])
        return self.commands.command.double()


def batch_groups(batch: list[EpisodeSpec], task_commands) -> dict[tuple[str, int], _Group]:
    """The (scenario, seed) groups of ``batch``'s envs, each with its generator and commands."""
    envs: dict[tuple[str, int], list[int]] = {}
    for e, spec in enumerate(batch):
        envs.setdefault(spec.key, []).append(e)
    return {key: _Group(batch[es[0]].scenario, key[1], es, task_commands, first_index=min(batch[e].index for e in es))
            for key, es in envs.items()}


def run_batch(backend, policy, task: TaskInterface, kinematics: RobotKinematics, batch: list[EpisodeSpec],
              settings: Settings, record_observations: int = 0, on_step=None) -> BatchResult:
    """Run the episodes ``batch`` (at most ``backend.num_envs``; extra envs stand idle at nominal settings) on the
    ground of ``kinematics`` (flat, or its terrain: the backend's must be the same)."""
    N, n = backend.num_envs, task.num_actions
    B = len(batch)
    if B > N:
        raise ValueError(f"{B} episodes do not fit a backend of {N} envs")
    if kinematics.model.num_envs != N:
        raise ValueError(f"kinematics for {kinematics.model.num_envs} envs, backend has {N}")
    robot, act, dt = task.robot, task.robot.actuator, backend.policy_dt
    if abs(dt - task.policy_dt) > 1e-9:
        raise ValueError(f"backend '{backend.name}' steps {dt} s, the task's policy step is {task.policy_dt} s")
    steps = batch_steps(batch, dt)
    duration = torch.tensor([s.scenario.duration_s for s in batch] + [0.0] * (N - B), dtype=torch.float64)

    # per-env parameters and groups
    params = EnvParameters.nominal(N)
    for e, spec in enumerate(batch):
        for key in params.__dataclass_fields__:
            getattr(params, key)[e] = spec.scenario.parameter(key, spec.index)
    groups = batch_groups(batch, task.env_cfg.commands)
    delay = torch.tensor([s.scenario.observation_delay_steps for s in batch] + [0] * (N - B), dtype=torch.long)
    kp = torch.as_tensor(act.stiffness * params.stiffness_scale)[:, None]
    kd = torch.as_tensor(act.damping * params.damping_scale)[:, None]
    lower = torch.tensor([j.lower for j in robot.joints], dtype=torch.float64)
    upper = torch.tensor([j.upper for j in robot.joints], dtype=torch.float64)

    q = torch.tensor(kinematics.model.default_q(base_height=task.reset_height), dtype=torch.float64)
    for g in groups.values():
        q[g.envs, 3:7] = yaw_quat(g.yaw)
    terrain = kinematics.terrain
    on_terrain = [s.scenario.terrain is not None for s in batch]
    if any(on_terrain) != (terrain is not None) or (terrain is not None and not all(on_terrain)):
        raise ValueError("a batch runs on terrain exactly when its scenarios have one and the backend's kinematics "
                         "carry that terrain")
    if terrain is not None:  # each episode on its tile's origin
        origins = torch.as_tensor(episode_origins(terrain, [(s.scenario, s.index) for s in batch]))
        q[:B, :2] = origins[:, :2]
        q[:B, 2] = origins[:, 2] + task.reset_height
    if task.height_scan:  # the ground the policy's scan reads: the terrain's heights, or the plane z = 0
        grid = HeightGrid.of(terrain) if terrain is not None else None

        def ground(x, y):
            return grid(x, y) if grid is not None else torch.zeros_like(x)
    u = torch.zeros(N, robot.num_joints + 6, dtype=torch.float64)
    backend.set_parameters(params)
    backend.reset(q, u)

    sums = MetricSums(N, n)
    alive = torch.ones(N, dtype=torch.bool)
    alive[B:] = False
    actions = torch.zeros(N, n, dtype=torch.float64)
    history = deque(maxlen=int(delay.max()) + 1)
    traced = {e: spec.scenario.name for e, spec in enumerate(batch) if spec.trace}
    records = {e: {k: [] for k in TRACE_KEYS} for e in traced}
    observations, recorded = [], 0
    previous_stance = np.zeros((N, len(robot.feet)), dtype=bool)
    # the gait's samples: stance per step (feet in the gait measure's LF, RF, LH, RH order) and its window
    legs = [next(i for i, f in enumerate(robot.feet) if f.name[:2] == leg) for leg in LEGS] \
        if sorted(f.name[:2] for f in robot.feet) == sorted(LEGS) else None
    stance_log, window_log = [], []
    position_log, command_log, standing_log = [], [], []
    base_com = task.base_com.expand(N, 3)
    command = torch.zeros(N, 3, dtype=torch.float64)
    for t in range(steps):
        time_s = t * dt
        q, u = backend.state()
        history.append((q, u))
        heading = BaseState(q, u, base_com).heading
        for g in groups.values():
            command[g.envs] = g.command(time_s, heading, dt)
        if int(delay.max()) > 0:  # the state the policy sees: ``delay`` policy steps old (the oldest at the start)
            back = (len(history) - 1 - delay).clamp(min=0)
            q_obs = torch.stack([h[0] for h in history])[back, torch.arange(N)]
            u_obs = torch.stack([h[1] for h in history])[back, torch.arange(N)]
        else:
            q_obs, u_obs = q, u
        obs = policy_observation(q_obs, u_obs, base_com, command, actions, task.default_il, task.to_isaaclab)
        if task.height_scan:  # Isaac Lab's scan of the (possibly delayed) state, clipped as in training
            scan = height_scan(torch.nan_to_num(q_obs[:, :3]), torch.nan_to_num(q_obs[:, 3:7]), ground)
            obs = torch.cat([obs, scan.clamp(-SCAN_CLIP, SCAN_CLIP)], dim=1)
        if task.gait_clock:  # the clock is the controller's own: never delayed
            obs = torch.cat([obs, gait_clock_observation(torch.full((N,), time_s, dtype=obs.dtype), task.gait_period)],
                            dim=1)
        with torch.no_grad():
            new_actions = policy(obs.float()).double()
        if record_observations and recorded < record_observations and t % 5 == 0:
            rows = obs[:B][alive[:B]].float()[: record_observations - recorded]
            observations.append(rows)
            recorded += rows.shape[0]
        target = task.default_sim + task.action_scale * new_actions[:, task.to_sim]
        qd = u[:, 6:]
        demand = kp * (target - q[:, 7:]) - kd * qd
        lo, hi = act.torque_bounds(qd.numpy())
        saturated = (demand.numpy() > hi + 1e-6) | (demand.numpy() < lo - 1e-6)
        backend.step(target)
        q, u = backend.state()
        torque = backend.joint_torque().numpy()
        base = BaseState(q, u, base_com)
        end = time_s + dt
        active = (torch.as_tensor(end <= duration + 1e-9)) & alive
        fallen = torch.as_tensor(kinematics.fallen(q, settings.fall_height))
        newly = fallen & active
        sums.fell |= newly.numpy()
        sums.fall_time = np.where(newly.numpy(), end, sums.fall_time)
        sums.fall_command = np.where(newly.numpy()[:, None], command.numpy(), sums.fall_command)
        alive &= ~newly
        gated = (active & ~fallen & torch.as_tensor(end > settings.warmup_s + 1e-9)).numpy()
        finite_q = torch.nan_to_num(q)
        foot_pos, _, contact_vel = kinematics.feet_and_contact_velocity(finite_q, torch.nan_to_num(u))
        heights = kinematics.foot_heights(foot_pos)
        stance = heights <= settings.stance_height
        # a foot in stance over the whole policy step (on the ground at its start and end): the slip gate's samples
        # (a foot passing through the band while landing or lifting off is in swing, not sliding in stance)
        planted = stance & previous_stance
        previous_stance = stance
        if legs is not None:
            stance_log.append(stance[:, legs])
            window_log.append(gated & (torch.linalg.norm(command[:, :2], dim=1) > settings.gait_min_speed).numpy())
        tilt = roll_pitch(finite_q[:, 3:7])
        position_log.append(finite_q[:, :2].numpy().copy())
        command_log.append(command[:, :2].numpy().copy())
        standing_log.append((active & alive).numpy())
        sums.add(gated, body_contact=kinematics.limb_contact(finite_q).astype(np.float64),
                 lin_err=torch.linalg.norm(command[:, :2] - base.lin_vel_b[:, :2], dim=1).numpy(),
                 ang_err=(command[:, 2] - base.ang_vel_b[:, 2]).abs().numpy(),
                 torque=torque, saturated=saturated,
                 qd_ratio=(u[:, 6:].abs().max(dim=1).values / act.velocity_limit).numpy(),
                 limit_excess=torch.clamp(torch.maximum(lower - q[:, 7:], q[:, 7:] - upper), min=0.0)
                 .max(dim=1).values.numpy(),
                 stance=planted, slip=np.linalg.norm(contact_vel[..., :2], axis=-1),
                 tilt=tilt.abs().max(dim=1).values.numpy(),
                 action_rate=torch.sqrt(torch.mean((new_actions - actions) ** 2, dim=1)).numpy())
        for e in records:
            if end > duration[e] + 1e-9:
                continue
            r = records[e]
            r["time"].append(end)
            r["command"].append(command[e].numpy().copy())
            r["lin_vel_b"].append(base.lin_vel_b[e].numpy())
            r["ang_vel_b"].append(base.ang_vel_b[e].numpy())
            r["base_pos"].append(q[e, :3].numpy())
            r["roll_pitch"].append(tilt[e].numpy())
            r["joint_pos"].append(q[e, 7:][task.to_isaaclab].numpy())
            r["joint_vel"].append(u[e, 6:][task.to_isaaclab].numpy())
            r["joint_target"].append(target[e][task.to_isaaclab].numpy())
            r["joint_torque"].append(torque[e][task.to_isaaclab.numpy()])
            r["foot_height"].append(heights[e])
            r["stance"].append(stance[e])
            r["q"].append(q[e].numpy())
            r["alive"].append(bool(alive[e]))
        actions = new_actions
        # pushes: a base velocity kick (world x, y) for the due envs of each pushed scenario
        pushed = torch.zeros(N, dtype=torch.bool)
        kicked = u.clone()
        for g in groups.values():
            if g.next_push is None:
                continue
            due = (g.next_push <= end) & alive[g.envs] & active[g.envs]
            kick = _uniform(g.gen, -g.scenario.push.velocity_xy, g.scenario.push.velocity_xy, len(g.envs), 2)
            later = end + _uniform(g.gen, *g.scenario.push.interval_s, len(g.envs))
            g.next_push = torch.where(due, later, g.next_push)
            if bool(due.any()):
                idx = g.envs[due]
                kicked[idx, :2] += kick[due]
                pushed[idx] = True
        if bool(pushed.any()):
            backend.reset(q, kicked, pushed)
        if on_step is not None:
            finished = int(((duration[:B] <= end + 1e-9) | ~alive[:B]).sum())
            on_step(t + 1, steps, finished)
    sums.stuck = stuck(np.stack(position_log), np.stack(command_log), np.stack(standing_log), dt)
    episodes = [(spec, {k: v[0] for k, v in sums.rows(np.array([e])).items()}) for e, spec in enumerate(batch)]
    if legs is not None:  # the gait of each episode over its window (None: too little of it)
        stance_all, window_all = np.stack(stance_log), np.stack(window_log)
        for e, (_, row) in enumerate(episodes):
            enough = window_all[:, e].sum() * dt >= settings.gait_min_seconds - 1e-9
            row["gait"] = measure_gait(stance_all[:, e], dt, window_all[:, e]) if enough else None
    traces = {name: {k: np.asarray(v) for k, v in records[e].items()} for e, name in traced.items()}
    return BatchResult(episodes=episodes, traces=traces, observations=observations, steps=steps)
