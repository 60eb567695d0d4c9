"""The rsl_rl-style command line of ``scripts/train.py`` and ``scripts/play.py``: arguments, configs with
overrides, log directories, checkpoints.

Logs: ``logs/<algo>/<experiment_name>/<YYYY-mm-dd_HH-MM-SS>[_<run_name>]/`` with ``params/env.yaml``,
``params/agent.yaml``, ``model_<it>.pt`` and TensorBoard event files (as Isaac Lab's ``logs/rsl_rl/...``).
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime

from diffloco_ext.tasks import registry
from diffloco_ext.tasks.cfg_override import ConfigOverrideError, apply_overrides, dump_yaml, parse_overrides

from .checkpoint import get_checkpoint_path

ALGORITHMS = tuple(registry.AGENT_ENTRY_POINTS)


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (a one-line error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def device(text: str) -> str:
    """An argparse type: ``cpu`` or ``cuda[:N]`` of a GPU this machine has (a one-line error otherwise)."""
    import torch

    name = text.strip().lower()
    if name == "cpu":
        return name
    if not (name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit())):
        raise argparse.ArgumentTypeError(f"expected cpu or cuda[:N], got {text!r}")
    if not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text!r}: this machine has no CUDA GPU (torch {torch.__version__}); use cpu")
    index = int(name[5:]) if ":" in name else 0
    if index >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(f"{text!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return name


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, help="registered task id (scripts/list_envs.py lists them)")
    parser.add_argument("--algo", default="shac", choices=ALGORITHMS, help="learner: shac (default) or ppo")
    parser.add_argument("--num_envs", type=positive_int, default=None,
                        help="parallel environments (per process; default: the task's)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the env and the learner")
    parser.add_argument("--device", type=device, default=None, help="cpu or cuda[:N] (simulation and learner)")
    parser.add_argument("--experiment_name", default=None, help="log folder under logs/<algo>/")
    parser.add_argument("--run_name", default=None, help="suffix of the run folder")
    parser.add_argument("--load_run", default=None, help="run folder (regex) to load from (default: latest)")
    parser.add_argument("--checkpoint", default=None, help="checkpoint file (regex, or a path) to load")
    parser.add_argument("--log_root", default="logs", help="root of the log folders")
    parser.add_argument("overrides", nargs="*", help="config overrides: env.<field>=<value> agent.<field>=<value>")


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (network initialisation, exploration noise, the
    runner's random episode lengths; the env draws from its own generator, seeded by its config), as Isaac Lab's
    train scripts do with the agent's seed. Data-parallel ranks pass ``seed + rank``."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def check_gait(env_cfg) -> None:
    """A velocity task's gait after the overrides (``env.gait.duty=1.5``): a :class:`ConfigOverrideError` naming the
    field, before any env is built."""
    gait = getattr(env_cfg, "gait", None)
    if gait is not None:
        try:
            gait.check("env.gait")
        except ValueError as err:
            raise ConfigOverrideError(str(err)) from None


def load_configs(args: argparse.Namespace, play: bool = False):
    """The task's env and agent configs with the CLI arguments and the overrides applied (validated).

    ``play``: the task's play config (:func:`~diffloco_ext.tasks.registry.load_play_cfg`). With a learner other than
    SHAC, the task's gradient adversary (the velocity recipe's ``randomization.after_curriculum.adversarial_fraction``)
    is switched off, with a line that says so: it needs the env's gradient; an override that sets it is an error."""
    env_cfg = registry.load_play_cfg(args.task) if play else registry.load_cfg(args.task, "env_cfg_entry_point")
    agent_cfg = registry.load_agent_cfg(args.task, args.algo)
    rand = getattr(env_cfg, "randomization", None)
    if args.algo != "shac" and rand is not None:
        adversary = [r for r in (rand, rand.after_curriculum) if getattr(r, "adversarial_fraction", None)]
        for r in adversary:
            r.adversarial_fraction = None if r is rand.after_curriculum else 0.0
        if adversary and not play:
            print(f"[diffloco] {args.algo}: the task's gradient adversary (env.randomization.after_curriculum."
                  f"adversarial_fraction) needs a learner that backpropagates through the env: off", flush=True)
    if args.num_envs is not None:
        env_cfg.num_envs = args.num_envs
    if args.seed is not None:
        env_cfg.seed = agent_cfg.seed = args.seed
    if args.device is not None:
        env_cfg.sim.device = agent_cfg.device = args.device
    for name in ("experiment_name", "run_name"):
        if getattr(args, name, None) is not None:
            setattr(agent_cfg, name, getattr(args, name))
    if getattr(args, "max_iterations", None) is not None:
        agent_cfg.max_iterations = args.max_iterations
    if getattr(args, "logger", None) is not None:
        agent_cfg.logger = args.logger
    if args.load_run is not None:
        agent_cfg.load_run = args.load_run
    if args.checkpoint is not None:
        agent_cfg.load_checkpoint = args.checkpoint
    overrides = parse_overrides(args.overrides)
    apply_overrides(env_cfg, overrides["env"], "env")
    apply_overrides(agent_cfg, overrides["agent"], "agent")
    check_gait(env_cfg)
    rand = getattr(env_cfg, "randomization", None)
    if args.algo != "shac" and rand is not None and (getattr(rand, "adversarial_fraction", 0.0) or getattr(
            getattr(rand, "after_curriculum", None), "adversarial_fraction", 0.0)):
        raise ConfigOverrideError(f"env.randomization.adversarial_fraction moves parameters along the gradient of "
                                  f"the actor's loss, which only a learner that backpropagates through the env "
                                  f"computes (shac); --algo {args.algo} would leave them where they were drawn: "
                                  f"set it to 0")
    return env_cfg, agent_cfg


def experiment_dir(args, agent_cfg) -> str:
    return os.path.join(args.log_root, args.algo, agent_cfg.experiment_name)


def new_run_dir(args, agent_cfg, env_cfg) -> str:
    """A fresh run folder with ``params/env.yaml`` and ``params/agent.yaml``."""
    name = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    if agent_cfg.run_name:
        name += f"_{agent_cfg.run_name}"
    log_dir = os.path.abspath(os.path.join(experiment_dir(args, agent_cfg), name))
    os.makedirs(os.path.join(log_dir, "params"), exist_ok=True)
    dump_yaml(env_cfg, os.path.join(log_dir, "params", "env.yaml"))
    dump_yaml(agent_cfg, os.path.join(log_dir, "params", "agent.yaml"))
    return log_dir


def resolve_checkpoint(args, agent_cfg, checkpoint: str | None = None) -> str:
    """A checkpoint path: ``checkpoint`` if it is a file; ``"latest"`` or a regex: the latest match in the
    latest run (matching ``load_run``) of the experiment."""
    checkpoint = checkpoint if checkpoint is not None else agent_cfg.load_checkpoint
    if checkpoint and os.path.isfile(checkpoint):
        return os.path.abspath(checkpoint)
    pattern = "model_.*.pt" if checkpoint in (None, "", "latest") else checkpoint
    return get_checkpoint_path(experiment_dir(args, agent_cfg), agent_cfg.load_run, pattern)


def learn_within_budget(runner, minutes: float, probe_iterations: int = 5, init_at_random_ep_len: bool = True,
                        refits: int = 3, schedule_iterations: int | None = None) -> int:
    """Train for about ``minutes`` of wall-clock.

    Without ``schedule_iterations``: ``probe_iterations`` first, then as many more as the measured iteration time
    fits, re-fitted ``refits`` times on the way (at 1/(refits+1), 2/(refits+1), ... of the run: on a shared machine
    the iteration time changes with the load), with the learning-rate schedule stretched over the whole run (so the
    schedule, and the run, depend on the machine's speed and load).

    With ``schedule_iterations``: the schedule is fixed to that many iterations whatever the machine (a seed's run
    is the same run on any machine, up to where it stops), and training stops at ``schedule_iterations`` or at the
    first checkpoint interval past which the next chunk would overrun the budget, whichever comes first.

    Data-parallel ranks agree on the count (the slowest rank's time). Returns the number of iterations run."""
    import time

    import torch

    if schedule_iterations is not None:
        return _learn_on_fixed_schedule(runner, minutes, schedule_iterations, init_at_random_ep_len)
    first = int(getattr(runner, "current_learning_iteration", 0) or 0)  # > 0: a resumed run
    start = time.time()
    runner.learn(probe_iterations, init_at_random_ep_len=init_at_random_ep_len)
    done = probe_iterations
    budget = minutes * 60.0

    def fit() -> int:
        per_iteration = torch.tensor([(time.time() - start) / done])
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(per_iteration, op=torch.distributed.ReduceOp.MAX)
        total = max(done + 1, int(budget / float(per_iteration)))
        if hasattr(runner.alg, "max_iterations"):
            # SHAC's schedule spans the whole budget (and a resumed run's past)
            runner.alg.max_iterations = first + total
        runner.cfg["max_iterations"] = total
        runner.cfg["budget_iterations"] = first + total  # the progress line's last iteration while training in chunks
        print(f"[diffloco] {float(per_iteration):.2f} s per iteration: {total} iterations in {minutes:g} min",
              flush=True)
        return total

    total = fit()
    for k in range(1, refits + 1):
        stop = max(done + 1, (total * k) // (refits + 1))
        if stop >= total:
            break
        runner.learn(stop - done)
        done = stop
        total = fit()
    if total > done:
        runner.learn(total - done)
    return total


def _learn_on_fixed_schedule(runner, minutes: float, schedule_iterations: int, init_at_random_ep_len: bool) -> int:
    """:func:`learn_within_budget` with a fixed schedule: chunks of the checkpoint interval (each ends with a
    checkpoint) until ``schedule_iterations`` or until the next chunk, at the slowest rank's pace so far, would end
    past the budget."""
    import time

    import torch

    total = max(1, int(schedule_iterations))
    # a resumed run (``current_learning_iteration`` > 0) trains ``total`` more, as rsl_rl's learn(), and SHAC's
    # learning-rate schedule spans the run's iterations from its origin, so an interrupted schedule resumed with the
    # iterations it had left is the schedule it was
    first = int(getattr(runner, "current_learning_iteration", 0) or 0)
    if hasattr(runner.alg, "max_iterations"):
        runner.alg.max_iterations = first + total
    runner.cfg["max_iterations"] = total
    runner.cfg["budget_iterations"] = first + total
    chunk = max(1, int(runner.cfg.get("save_interval", 50) or 50))
    start, done, budget = time.time(), 0, minutes * 60.0
    while done < total:
        n = min(chunk, total - done)
        runner.learn(n, init_at_random_ep_len=init_at_random_ep_len and done == 0)
        done += n
        elapsed = torch.tensor([time.time() - start])
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(elapsed, op=torch.distributed.ReduceOp.MAX)
        per_iteration = float(elapsed) / done
        if done < total and float(elapsed) + per_iteration * min(chunk, total - done) > budget:
            print(f"[diffloco] stopping at iteration {done} of the {total}-iteration schedule: the next "
                  f"{min(chunk, total - done)} would end past the {minutes:g}-min budget "
                  f"({per_iteration:.2f} s per iteration)", flush=True)
            break
    return done
