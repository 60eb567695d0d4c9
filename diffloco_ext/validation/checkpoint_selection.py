"""Checkpoints of a run measured closed-loop, as deployed, and the one to ship chosen by falls, then tracking.

A training run's late checkpoints differ more in how often they fall than their training curves show (the main
job's SHAC runs: 16-22 % falls in 100 random-command episodes from one checkpoint to the next; docs/design.md:
shipping: checkpoint averaging): the training curve reads the training distribution with its randomisation and
exploration noise, not the deployed policy. This measures each checkpoint as :mod:`.validation_run` does (the exported
TorchScript policy, deterministic, in the given backend, the task's own observation code) on the random-command scenario
of a validation config, and picks the one with the fewest falls, ties broken by the planar tracking error. With
``max_action_rate`` the checkpoints whose actions chatter (RMS change per policy step above it) come after every smooth
one: a chattering SHAC policy can walk without falling in the training simulator's hard contact and fall at once in
MuJoCo (action rate 1.3, 0 / 100 falls in hard contact, 100 / 100 in MuJoCo; docs/design.md: shipping: guard).

The selection episodes should not be the ones the chosen policy is reported on: :func:`measure_checkpoints` takes
the seeds to use (the main job selects on seed 1, its report and the task issue's measurement use seed 0).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

from . import backend_registry
from .closed_loop import TaskInterface, plan_episodes, run_batch
from .gates import scenario_metrics
from .policy_io import load_checkpoint
from .robot_kinematics import RobotKinematics
from .scenarios import load_config
from .terrain_scenarios import validation_terrain


def measure_checkpoints(checkpoints: list[tuple[int, str]], task: str, config_path: str, backend: str = "hard",
                        scenario: str = "random_commands", seeds: list[int] | None = None,
                        episodes: int | None = None, printer: Callable[[str], None] | None = print) -> list[dict]:
    """Each checkpoint on ``scenario`` of the validation config ``config_path`` in ``backend``.

    Args:
        checkpoints: ``[(iteration, path)]`` (e.g. :func:`diffloco_ext.learning.run_history.run_checkpoints`).
        task: the registered task id of the checkpoints (its observation code and conventions).
        seeds, episodes: override the scenario's seeds / episodes per seed (None: the config's).

    Returns:
        ``[{"iteration", "path", "lin_vel_error" (m/s), "ang_vel_error" (rad/s), "fall_rate" (0-1), "falls",
        "episodes", "action_rate" (RMS action change per policy step)}]`` in the order given.
    """
    interface = TaskInterface.from_task(task)
    config = load_config(config_path)
    chosen = [s for s in config.scenarios if s.name == scenario]
    if not chosen:
        raise ValueError(f"{config_path} has no scenario '{scenario}' (it has "
                         f"{[s.name for s in config.scenarios]})")
    if seeds is not None:
        chosen[0].seeds = list(seeds)
    if episodes is not None:
        chosen[0].episodes = int(episodes)
    specs = plan_episodes(chosen)
    terrain = validation_terrain(chosen, interface.env_cfg, config.settings.terrain_seed)
    sim = backend_registry.make_backend(backend, interface.robot, len(specs), policy_dt=interface.policy_dt,
                                        terrain=terrain)
    kinematics = RobotKinematics(interface.robot, len(specs), terrain)
    rows = []
    try:
        for iteration, path in checkpoints:
            with tempfile.TemporaryDirectory() as export_dir:
                policy = load_checkpoint(path, task, export_dir, interface.num_obs, interface.num_actions)
                result = run_batch(sim, policy, interface, kinematics, specs, config.settings)
            m = scenario_metrics([row for _, row in result.episodes], interface.robot.actuator.effort_limit)
            rows.append({"iteration": iteration, "path": path, "lin_vel_error": m["lin_vel_error"],
                         "ang_vel_error": m["ang_vel_error"], "fall_rate": m["fall_rate"],
                         "falls": int(round(m["fall_rate"] * len(specs))), "episodes": len(specs),
                         "action_rate": m["action_rate"], "stuck_rate": m["stuck_rate"],
                         "body_contact": m["body_contact"]})
            if printer is not None:
                printer(f"{os.path.basename(path)}: v_xy err {m['lin_vel_error']:.3f} m/s, w_z err "
                        f"{m['ang_vel_error']:.3f} rad/s, falls {rows[-1]['falls']}/{len(specs)}, action rate "
                        f"{m['action_rate']:.2f}")
    finally:
        close = getattr(sim, "close", None)
        if close is not None:
            close()
    return rows


def _measure_share(share: list[tuple]) -> list[list[dict]]:
    """A worker process's part of :func:`measure_checkpoint_groups`: ``[(name, checkpoints, task, config,
    backend, episodes)]``."""
    import torch

    torch.set_num_threads(1)
    return [measure_checkpoints(checkpoints, task, config_path, backend, episodes=episodes,
                                printer=lambda line, name=name: print(f"[measure] {name} {line}", flush=True))
            for name, checkpoints, task, config_path, backend, episodes in share]


def measure_checkpoint_groups(groups: list[list[tuple[int, str]]], task: str, config_path: str, backend: str = "hard",
                              jobs: int = 1, names: list[str] | None = None,
                              episodes: int | None = None) -> list[list[dict]]:
    """:func:`measure_checkpoints` of several groups (e.g. runs) of checkpoints, their checkpoints dealt out to
    ``jobs`` processes (Warp's CPU kernels use one core each). Each checkpoint is measured as by one process (the
    same episodes, the same numbers); per group, the rows in the order of its ``(iteration, path)`` list.
    ``episodes``: per checkpoint (None: the scenario's)."""
    names = names or [f"group {i}" for i in range(len(groups))]
    work = [(g, k) for g, group in enumerate(groups) for k in range(len(group))]  # (group, position in it)
    shares = [work[i::jobs] for i in range(max(1, min(jobs, len(work))))]
    plans = [[(g, [k for gg, k in share if gg == g]) for g in sorted({gg for gg, _ in share})] for share in shares]
    calls = [[(names[g], [groups[g][k] for k in ks], task, config_path, backend, episodes) for g, ks in plan]
             for plan in plans]
    if len(calls) == 1:
        results = [_measure_share(calls[0])]
    else:
        import concurrent.futures
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(len(calls), mp_context=context) as pool:
            results = list(pool.map(_measure_share, calls))
    rows: list[list] = [[None] * len(group) for group in groups]
    for plan, measured in zip(plans, results):
        for (g, ks), group_rows in zip(plan, measured):
            for k, row in zip(ks, group_rows):
                rows[g][k] = row
    return rows


def select_checkpoint(rows: list[dict], max_action_rate: float | None = None,
                      max_lin_vel_error: float | None = None) -> dict:
    """The row with the fewest falls, ties broken by the lower planar tracking error (then the later iteration).

    With ``max_action_rate``, rows whose ``action_rate`` exceeds it rank after all the others (among themselves by
    action rate first): a chattering checkpoint is shipped only if every one chatters, and then the smoothest.
    With ``max_lin_vel_error`` (m/s), smooth rows that do not track within it rank after the smooth ones that do
    (among themselves by tracking error first): a policy that stands or steps in place falls rarely, and is not
    what a velocity controller is for."""
    if not rows:
        raise ValueError("no checkpoints to select from")

    def key(r):
        rate = r.get("action_rate", 0.0)
        chatters = max_action_rate is not None and rate > max_action_rate
        lags = max_lin_vel_error is not None and r["lin_vel_error"] > max_lin_vel_error
        return (chatters, rate if chatters else 0.0, lags, r["lin_vel_error"] if lags else 0.0, r["fall_rate"],
                r["lin_vel_error"], -r["iteration"])

    return min(rows, key=key)
