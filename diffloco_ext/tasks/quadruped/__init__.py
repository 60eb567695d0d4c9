"""``DiffLoco-Quadruped-Forward``: the Warp quadruped walking forward at 1 m/s (paper A, section A.2)."""
