"""Train a registered task with SHAC (default) or rsl_rl's PPO, rsl_rl-style.

    # the velocity task's training recipe (its registered configs), one process of 128 envs
    .venv/bin/python scripts/train.py --task DiffLoco-Velocity-Flat-AnymalD --algo shac
    # exactly what `make train` trains: two data-parallel ranks of 128 envs, one per core
    .venv/bin/torchrun --nproc_per_node=2 scripts/train.py --task DiffLoco-Velocity-Flat-AnymalD --algo shac
    # rsl_rl's PPO with Isaac Lab's ANYmal-D settings on the same env
    .venv/bin/python scripts/train.py --task DiffLoco-Velocity-Flat-AnymalD --algo ppo --num_envs 512
    # overrides of any config field, and resuming
    .venv/bin/python scripts/train.py --task DiffLoco-Velocity-Flat-AnymalD env.sim.contact.kappa=300
    .venv/bin/python scripts/train.py --task ... --resume --load_run 2026-12-01_10-00-00 --checkpoint model_100.pt

Logs go to ``logs/<algo>/<experiment>/<timestamp>[_<run>]/`` (``params/env.yaml``, ``params/agent.yaml``,
``model_<it>.pt`` every 50 iterations, TensorBoard); one progress line per iteration (reward, tracking errors,
episode length, env-steps/s, time left). Unknown task ids, unknown override keys and values of the wrong type are
one-line errors.
"""

import sys

from diffloco_ext.learning.train import main

if __name__ == "__main__":
    main(sys.argv[1:])
