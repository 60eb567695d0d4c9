"""The MuJoCo engine on generated terrain: the height field as the ground, the collision capsules colliding with it
(on terrain only), robots standing where the terrain's own heights put them."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from diffloco_ext.assets import get_robot
from diffloco_ext.assets.mjcf_exporter import to_mjmodel
from diffloco_ext.sim.mujoco_engine import MujocoEngine
from diffloco_ext.sim.terrain_generator import PyramidSlopeCfg, generate, rough_terrains_cfg


@pytest.fixture(scope="module")
def slope():
    cfg = rough_terrains_cfg(num_rows=1, num_cols=1, border_width=2.0, difficulty_range=(0.4, 0.5))
    cfg.sub_terrains = {"slope": PyramidSlopeCfg(proportion=1.0)}
    return generate(cfg)


def _arrays(terrain):
    return terrain.heights, terrain.origin_xy, terrain.cfg.resolution


def test_collision_capsules_collide_with_the_terrain_when_asked(slope):
    robot = get_robot("anymal_d")
    for body_collisions, expected in ((True, True), (False, False)):
        model = to_mjmodel(robot, _arrays(slope), body_collisions=body_collisions)
        data = mujoco.MjData(model)
        x, y = slope.tile_origins[0, 0, :2] + (2.5, 0.0)
        data.qpos[:3] = (x, y, slope.height_at(x, y) + 0.12)  # the base lowered into the slope
        mujoco.mj_forward(model, data)
        bodies = {model.geom_bodyid[g] for c in data.contact[:data.ncon] for g in (c.geom1, c.geom2)}
        names = {model.body(b).name for b in bodies} - {"world"}
        assert (robot.bodies[0].name in names) == expected  # the base capsule touches the ground
        feet = {model.body(robot.feet[0].body).name}
        assert names - feet  # (with or without, the feet are on the ground)


def test_robots_stand_on_the_terrain_heights(slope):
    robot = get_robot("anymal_d")
    engine = MujocoEngine(robot, 2, threads=1, terrain=_arrays(slope))
    q = np.tile(engine.model.qpos0, (2, 1))
    origin = slope.tile_origins[0, 0]
    for e, dx in enumerate((0.0, 2.5)):  # on the top platform, and on the 0.16-0.2 slope below it
        x, y = origin[0] + dx, origin[1]
        gx, gy = np.meshgrid(x + np.linspace(-0.6, 0.6, 13), y + np.linspace(-0.4, 0.4, 9))
        q[e, :3] = (x, y, slope.height_at(gx, gy).max() + 0.6)  # every foot above the ground (a sphere started
        # inside a height field sinks: MuJoCo's height-field contacts push out of the surface, not the volume)
    q[:, 7:] = robot.default_joint_positions()
    u = np.zeros((2, engine.model.nv))
    target = np.tile(robot.default_joint_positions(), (2, 1))
    for _ in range(75):
        out = engine.step(q, u, target)
        q, u = out.q, out.u
    assert not out.diverged.any()
    data = mujoco.MjData(engine.model)
    for e in range(2):
        data.qpos[:] = q[e]
        mujoco.mj_kinematics(engine.model, data)
        for foot in robot.feet:
            centre = data.geom_xpos[engine.model.geom(foot.name).id]
            gap = centre[2] - foot.radius - slope.height_at(centre[0], centre[1])
            assert -0.02 < gap < 0.02  # every foot on the ground it was generated with
        assert 0.35 < q[e, 2] - slope.height_at(q[e, 0], q[e, 1]) < 0.65  # standing, not sunk or fallen
    assert np.abs(u[:, :3]).max() < 0.3  # at rest within ~1.5 s (no slide down the slope)
    engine.set_parameters(friction=np.array([0.5, 0.8]))
    assert engine.models[1].geom_friction[engine.model.geom("terrain").id, 0] == 0.8
