"""Train a registered task with SHAC (default) or rsl_rl's PPO, rsl_rl-style: the command line of
:mod:`diffloco_ext.learning.train` (``--help`` lists the options, with examples).

    .venv/bin/python scripts/train.py --task DiffLoco-Velocity-Flat-AnymalD --algo shac
"""

import sys

from diffloco_ext.learning.train import main

if __name__ == "__main__":
    main(sys.argv[1:])
