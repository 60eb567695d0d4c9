"""``State`` (what changes every step) and ``Control`` (what the controller writes), Newton-style.

Shapes: ``N`` environments, ``nq = 7 + n`` positions, ``nv = 6 + n`` velocities, ``n`` joints; coordinate
conventions in :mod:`.model`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp


@dataclass
class State:
    """Generalised positions ``q`` [N, nq] and velocities ``u`` [N, nv] (Warp arrays of the model's dtype)."""

    q: wp.array
    u: wp.array

    def numpy(self) -> tuple[np.ndarray, np.ndarray]:
        return self.q.numpy(), self.u.numpy()


@dataclass
class Control:
    """Joint position targets [N, n] (rad) for the PD drives and feed-forward joint torques [N, n] (N·m)."""

    joint_target: wp.array
    joint_torque: wp.array
