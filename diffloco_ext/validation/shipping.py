"""Choosing the policy a training run ships: the actor averaged over its late checkpoints (stochastic weight averaging)
unless it chatters or does not track, else the checkpoint that falls least; of several runs, the one that falls least
on a softer ground. Every candidate is measured closed-loop as deployed, in our hard contact (and MuJoCo).

The options come from the main job's config (:class:`~diffloco_ext.validation.main_job.MainJobCfg`): ``task``,
``iterations`` (the schedule), ``select_from``, ``ship`` (``"average"`` or ``"best"``), ``select_episodes``,
``select_soft_episodes``. Why each choice: ``docs/design.md`` (shipping).
"""

from __future__ import annotations

import os
import time

from ..learning.checkpoint import read_params_yaml
from ..learning.run_history import run_checkpoints
from ..learning.weight_averaging import average_checkpoints
from .checkpoint_selection import measure_checkpoints, select_checkpoint
from .scenarios import CONFIG_DIR

#: Checkpoints whose actions change by more than this RMS per policy step (raw action units) rank after the smooth
#: ones: walking policies run at 0.15-0.46, chattering ones at 0.8-1.3 (no fall in our hard contact, every episode a
#: fall in MuJoCo).
MAX_ACTION_RATE = 0.6
#: Checkpoints with a planar tracking error above this (m/s, the tracking target in hard contact) rank after the ones
#: that track: a run that steps in place falls rarely (0-4 falls in 100 at 0.6-0.7 m/s).
MAX_LIN_VEL_ERROR = 0.25
#: The selection's episodes: fast commands (0.85-1.41 m/s, the edge of the command square), where nearly all falls
#: of uniform commands are; there one run's checkpoints fall 8-51 times in 100 against 2-22 on uniform commands, so
#: the ranking is far less noise.
SELECTION_CONFIG = str(CONFIG_DIR / "anymal_d_fast_commands.yaml")
SELECTION_SCENARIO = "fast_commands"
#: Of several runs, each one's policy is also measured on uniform commands on a softer ground: MuJoCo with twice its
#: default contact time constant, where the seeds of the recipe differ most (5-128 falls in 1000 over four seeds,
#: against 1-11 at MuJoCo's default).
SOFT_SELECTION_CONFIG = str(CONFIG_DIR / "anymal_d_random100.yaml")
SOFT_SELECTION_BACKEND = "mujoco-soft"
SELECTION_KEYS = ("falls", "episodes", "lin_vel_error", "ang_vel_error", "action_rate")


def select_in_run(cfg, log_dir: str, iterations: int, printer=print) -> dict:
    """Choose what a run ships from its checkpoints from ``cfg.select_from`` of its ``iterations`` on: with
    ``cfg.ship == "average"`` their averaged actor, measured closed-loop (hard contact, 100
    fast-command episodes of seed 1, the deployed policy), ships if it neither chatters nor lags; otherwise (or with
    ``--ship best``) the checkpoints are measured and the best ships. Returns ``{"candidates": rows, "chosen": row,
    "average": row or None, "seconds"}``; a row's ``iteration`` is its checkpoint's (the average's: the last one
    averaged), the average's row has ``averaged_iterations``, and the checkpoints' rows carry measurements only if
    they were measured."""
    start = time.time()
    # the fraction of the schedule, not of the iterations run: a run the time guard stopped early averages the same
    # late checkpoints as a whole one; a run stopped before that fraction falls back to its own
    schedule = max(int(cfg.iterations or 0), iterations)
    candidates = run_checkpoints(log_dir, since=int(cfg.select_from * schedule))
    if not candidates:
        candidates = run_checkpoints(log_dir, since=int(cfg.select_from * iterations))
    if not candidates or cfg.select_from >= 1.0:
        candidates = run_checkpoints(log_dir)[-1:]
    average = None
    if cfg.ship == "average" and len(candidates) > 1:
        first, last = candidates[0][0], candidates[-1][0]
        path = os.path.join(log_dir, f"average_{first}-{last}.pt")
        average_checkpoints([p for _, p in candidates], path)
        printer(f"averaged the actors of {len(candidates)} checkpoints (iterations {first}-{last}): "
                f"{os.path.basename(path)}")
        average = (last, path)

    def measure(policies):
        printer(f"measuring {len(policies)} polic{'y' if len(policies) == 1 else 'ies'} closed-loop (hard "
                f"contact, {cfg.select_episodes} fast-command episodes of seed 1)")
        return measure_checkpoints(policies, cfg.task, SELECTION_CONFIG, "hard", scenario=SELECTION_SCENARIO, seeds=[1],
                                   episodes=cfg.select_episodes,
                                   printer=lambda line: printer(f"  {line}"))

    # the average first: it ships unless it chatters or does not track, and only then are the checkpoints measured
    # (ten policies take ~80 s)
    rows = [{"iteration": it, "path": path} for it, path in candidates]  # not measured (yet)
    chosen = average_row = None
    if average:
        average_row = measure([average])[0]
        average_row["averaged_iterations"] = [it for it, _ in candidates]
        # NaN (no step measured: every episode fell at once) counts as failing the guards
        if not (average_row["action_rate"] <= MAX_ACTION_RATE and average_row["lin_vel_error"] <= MAX_LIN_VEL_ERROR):
            printer(f"the average chatters, does not track or walk (action rate {average_row['action_rate']:.2f}, "
                    f"planar error {average_row['lin_vel_error']:.3f} m/s): shipping the best checkpoint instead")
        else:
            chosen = average_row
            printer(f"shipping {os.path.basename(average_row['path'])} (falls "
                    f"{average_row['falls']}/{average_row['episodes']}, action rate {average_row['action_rate']:.2f}, "
                    f"planar error {average_row['lin_vel_error']:.3f} m/s)")
    if chosen is None:
        if len(rows) > 1:
            rows = measure(candidates)
            chosen = select_checkpoint(rows, MAX_ACTION_RATE, MAX_LIN_VEL_ERROR)
        else:
            chosen = rows[0]
        printer(f"shipping model_{chosen['iteration']}.pt")
    if chosen.get("action_rate", 0.0) > MAX_ACTION_RATE:
        printer(f"WARNING: every candidate chatters (action rate {chosen['action_rate']:.2f} > "
                f"{MAX_ACTION_RATE}): such policies walk in the training simulator and fall in MuJoCo; retrain "
                f"(another --seed)")
    elif chosen.get("lin_vel_error", 0.0) > MAX_LIN_VEL_ERROR:
        printer(f"WARNING: no candidate tracks the commands (planar error {chosen['lin_vel_error']:.2f} > "
                f"{MAX_LIN_VEL_ERROR} m/s): the run stepped in place; retrain (another --seed)")
    return {"candidates": rows, "chosen": chosen, "average": average_row, "seconds": time.time() - start}


def run_seed(log_dir: str) -> int | None:
    """The seed in a run's ``params/agent.yaml`` (None if the file or the field is missing)."""
    path = os.path.join(log_dir, "params", "agent.yaml")
    seed = read_params_yaml(path).get("seed") if os.path.isfile(path) else None
    return None if seed is None else int(seed)


def select(cfg, log_dirs: list[str], printer=print) -> dict:
    """Choose what to ship from one or more runs.

    Each run's policy is chosen by :func:`select_in_run`. Of several runs, each one's policy is then measured on a
    softer ground, MuJoCo with ``solref`` 0.04 s (``--backend mujoco-soft``, twice MuJoCo's default time constant),
    on ``--select_soft_episodes`` uniform-command episodes of seed 1 (the task issue's measurement is seed 0), and
    the one with the fewest falls over its selection episodes (these and the hard-contact fast commands) ships,
    ties broken by the planar error; policies that chatter or do not track rank last. Why: the recipe's seeds
    differ most in how their gait holds on a ground softer than the training's.
    Returns :func:`select_in_run`'s dict for the shipped run with ``"run"`` (its folder), ``"runs"`` (a row per
    run) and ``"seconds"`` for the whole selection."""
    start = time.time()
    per_run = []
    for log_dir in log_dirs:
        if len(log_dirs) > 1:
            printer(f"run {os.path.basename(log_dir)}")
        saved = run_checkpoints(log_dir)
        if not saved:
            raise FileNotFoundError(f"{log_dir}: no model_<iteration>.pt checkpoint to ship")
        per_run.append(select_in_run(cfg, log_dir, saved[-1][0], printer))
    if len(per_run) == 1:
        return {**per_run[0], "run": log_dirs[0], "runs": None, "seconds": time.time() - start}
    finalists = []
    for log_dir, chosen in zip(log_dirs, (r["chosen"] for r in per_run)):
        if "falls" not in chosen:  # a run with a single checkpoint: not measured in hard contact yet
            chosen.update(measure_checkpoints([(chosen["iteration"], chosen["path"])], cfg.task, SELECTION_CONFIG,
                                              "hard", scenario=SELECTION_SCENARIO, seeds=[1],
                                              episodes=cfg.select_episodes, printer=None)[0])
        finalists.append(chosen)
    printer(f"measuring each run's policy on a softer ground (MuJoCo, solref 0.04 s, "
            f"{cfg.select_soft_episodes} uniform-command episodes of seed 1)")
    soft = measure_checkpoints([(c["iteration"], c["path"]) for c in finalists], cfg.task, SOFT_SELECTION_CONFIG,
                               SOFT_SELECTION_BACKEND, scenario="random_commands", seeds=[1],
                               episodes=cfg.select_soft_episodes,
                               printer=lambda line: printer(f"  {line}"))
    rows = []
    for log_dir, chosen, on_soft in zip(log_dirs, finalists, soft):
        falls, episodes = chosen["falls"] + on_soft["falls"], chosen["episodes"] + on_soft["episodes"]
        rows.append({"run": log_dir, "seed": run_seed(log_dir), "iteration": chosen["iteration"],
                     "path": chosen["path"], "averaged_iterations": chosen.get("averaged_iterations"),
                     "hard_fast_commands": {k: chosen[k] for k in SELECTION_KEYS},
                     "soft_ground": {k: on_soft[k] for k in SELECTION_KEYS},
                     "falls": falls, "episodes": episodes, "fall_rate": falls / episodes,
                     "lin_vel_error": chosen["lin_vel_error"], "action_rate": chosen["action_rate"]})
    best = select_checkpoint(rows, MAX_ACTION_RATE, MAX_LIN_VEL_ERROR)
    for row in rows:
        row["shipped"] = row is best
        printer(f"seed {row['seed']}: {os.path.basename(row['path'])}, falls {row['falls']}/"
                f"{row['episodes']} (hard contact, fast commands {row['hard_fast_commands']['falls']}; softer ground "
                f"{row['soft_ground']['falls']}), planar error {row['lin_vel_error']:.3f} m/s, action rate "
                f"{row['action_rate']:.2f}{'  <- ships' if row['shipped'] else ''}")
    shipped = per_run[rows.index(best)]
    return {**shipped, "run": best["run"], "runs": [{k: v for k, v in r.items() if k != "path"} for r in rows],
            "seconds": time.time() - start}
