"""``DiffLoco-Quadruped-Forward``: the Warp quadruped walking forward at 1 m/s (Schwarke et al., arXiv 2404.02887,
section A.2)."""
