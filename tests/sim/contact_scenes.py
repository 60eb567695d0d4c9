"""Small scenes for the contact tests: a box resting on four corner spheres, and drop/stand helpers."""

from __future__ import annotations

import numpy as np

from diffloco_ext.assets.robot_description import Body, FootSphere, RobotDescription


def block(mass: float = 2.0, half=(0.2, 0.1, 0.05), radius: float = 0.01) -> RobotDescription:
    """A solid box (half extents in m) whose four bottom corners are contact spheres."""
    a, b, c = half
    inertia = mass / 3.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    base = Body("block", None, None, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0), mass, (0.0, 0.0, 0.0),
                tuple(map(tuple, inertia)))
    corners = [(1, 1), (1, -1), (-1, 1), (-1, -1)]
    feet = tuple(FootSphere(f"corner{i}", "block", (sx * a, sy * b, -c + radius), radius)
                 for i, (sx, sy) in enumerate(corners))
    return RobotDescription("block", (base,), feet=feet, default_base_height=c)


def rollout(sim, state, control, steps, record):
    out = sim.empty_state()
    history = []
    for _ in range(steps):
        data = sim.step(state, control, out)
        state, out = out, state
        history.append(record(state, data))
    return state, history
