"""A checkpoint measured in its own task's env under a chosen physics: for tasks the closed-loop validation does not
cover (no velocity commands: ``DiffLoco-Quadruped-Forward``), and for the task's reward as the measure.

:func:`measure_in_task_env` loads the checkpoint's actor into its learner (deterministic actions, as exported),
builds the task's play env (no observation noise, no randomisation) with the physics of :data:`PHYSICS`:

* ``smoothed``: the training simulator (smoothed contact);
* ``hard``: the project's hard contact;
* ``mujoco``: MuJoCo C (the aligned step's accurate engine, here forward only: no gradient is taken),

and runs every env's first episode (``seconds`` at most, from the same seeded initial states for every checkpoint
and physics). Returns the mean undiscounted return of those episodes (the task's reward), the mean of each of the
task's metrics over the steps before an env's episode ended (``forward_speed`` m/s for the quadruped), the fall
rate (episodes ended by a termination) and the action rate (RMS action change per policy step, action units).
"""

from __future__ import annotations

import numpy as np
import torch

from ..learning.runner import make_runner
from ..tasks import registry
from ..tasks.cfg_override import apply_overrides, parse_overrides
from ..tasks.vec_env import TIME_OUTS_KEY

#: physics name -> env overrides
PHYSICS: dict[str, tuple[str, ...]] = {
    "smoothed": (),
    "hard": ("env.sim.contact=hard",),
    "mujoco": ("env.sim.engine=mujoco", "env.sim.engine_threads=1"),
}


@torch.no_grad()
def measure_in_task_env(checkpoint: str, task: str, physics: str = "hard", algo: str = "shac", num_envs: int = 16,
                        seconds: float | None = None, seed: int = 0) -> dict:
    """See the module docstring; ``seconds`` None: the task's episode length."""
    if physics not in PHYSICS:
        raise ValueError(f"unknown physics '{physics}': use one of {list(PHYSICS)}")
    cfg = registry.load_play_cfg(task)
    cfg.num_envs, cfg.seed = int(num_envs), int(seed)
    for name in ("observation_noise", "randomization"):
        section = getattr(cfg, name, None)
        if section is not None and hasattr(section, "enable"):
            section.enable = False
    if PHYSICS[physics]:
        apply_overrides(cfg, parse_overrides(list(PHYSICS[physics]))["env"], "env")
    env = registry.make_env(task, cfg).unwrapped
    runner = make_runner(env, registry.load_agent_cfg(task, algo))
    runner.load(checkpoint, load_cfg={"actor": True, "critic": False, "optimizer": False, "iteration": False})
    policy = runner.get_inference_policy()
    steps = int(round((seconds if seconds is not None else cfg.episode_length_s) / env.step_dt))
    obs = env.get_observations()
    alive = torch.ones(env.num_envs, dtype=torch.bool)
    total = torch.zeros(env.num_envs, dtype=torch.float64)
    fell = torch.zeros(env.num_envs, dtype=torch.bool)
    sums: dict[str, torch.Tensor] = {}
    counts = torch.zeros(env.num_envs, dtype=torch.float64)
    rate, previous = torch.zeros(env.num_envs, dtype=torch.float64), None
    for _ in range(steps):
        actions = policy(obs)
        obs, rewards, dones, extras = env.step(actions)
        w = alive.double()
        total += w * rewards.double()
        counts += w
        for key, value in env.step_metrics.items():
            sums[key] = sums.get(key, torch.zeros_like(total)) + w * value.double()
        if previous is not None:
            rate += w * torch.sqrt(torch.mean((actions.double() - previous) ** 2, dim=1))
        previous = actions.double()
        done = dones.bool()
        time_out = extras[TIME_OUTS_KEY].bool() if TIME_OUTS_KEY in extras else torch.zeros_like(done)
        fell |= alive & done & ~time_out
        alive &= ~done
        if not bool(alive.any()):
            break
    out = {"return": float(total.mean()), "fall_rate": float(fell.double().mean()),
           "action_rate": float((rate / counts.clamp(min=1)).mean()), "episodes": int(env.num_envs),
           "physics": physics}
    out.update({key: float((value / counts.clamp(min=1)).mean()) for key, value in sums.items()})
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in out.items()}
