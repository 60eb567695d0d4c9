"""validation/render.py: frames of robot states on flat ground and on a generated terrain (MuJoCo's offscreen
renderer, software GL)."""

from __future__ import annotations

import numpy as np

from diffloco_ext.assets import get_robot
from diffloco_ext.sim.terrain_generator import generate, rough_terrains_cfg
from diffloco_ext.validation.render import render_states


def test_frames_on_flat_ground_and_on_terrain():
    robot = get_robot("anymal_d")
    terrain = generate(rough_terrains_cfg(num_rows=1, num_cols=2, border_width=2.0, difficulty_range=(0.9, 1.0)))
    q = np.zeros((2, 19))
    q[:, 3], q[:, 7:] = 1.0, robot.default_joint_positions()
    flat_q = q.copy()
    flat_q[:, 2] = 0.6
    origin = terrain.tile_origins[0, 0]
    q[:, :3] = origin + (0.0, 0.0, 0.6)
    flat = render_states(robot, flat_q, width=96, height=64, shadows=False)
    rough = render_states(robot, q, width=96, height=64, shadows=False, terrain=terrain)
    assert flat.shape == rough.shape == (2, 64, 96, 3) and flat.dtype == np.uint8
    assert rough.std() > 5 and np.abs(rough.astype(int) - flat.astype(int)).mean() > 1  # a scene, not the floor's
