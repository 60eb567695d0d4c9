"""The height scan against Isaac Lab 3.0's own code: its grid pattern (the rough task's scanner config, point for
point), its ``height_scan`` observation on the hits of our scan points (formula, offset, sign), and its yaw-only
alignment (``yaw_quat``, x-y-z-w) against ours (w-x-y-z)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from diffloco_ext.tasks.velocity.height_scan import OFFSET, height_scan, scan_points, scan_positions, yaw_of


def test_grid_is_the_rough_tasks_scanner_pattern():
    from isaaclab.sensors.ray_caster.patterns.patterns import grid_pattern
    from isaaclab_tasks.core.velocity.velocity_env_cfg import MySceneCfg

    scanner = MySceneCfg(num_envs=1, env_spacing=2.5).height_scanner
    starts, directions = grid_pattern(scanner.pattern_cfg, "cpu")
    assert torch.equal(scan_points(dtype=torch.float32), starts[:, :2])
    assert (directions == torch.tensor([0.0, 0.0, -1.0])).all()
    assert scanner.ray_alignment == "yaw" and tuple(scanner.offset.pos) == (0.0, 0.0, 20.0)


def test_observation_is_isaac_labs_height_scan():
    from isaaclab.envs.mdp.observations import height_scan as il_height_scan
    from isaaclab.managers import SceneEntityCfg

    gen = torch.Generator().manual_seed(0)
    pos = torch.rand(5, 3, generator=gen, dtype=torch.float64) + torch.tensor([0.0, 0.0, 0.5], dtype=torch.float64)
    quat = torch.nn.functional.normalize(torch.randn(5, 4, generator=gen, dtype=torch.float64), dim=1)

    def ground(x, y):
        return 0.1 * torch.sin(3 * x) + 0.05 * y

    ours = height_scan(pos, quat, ground)
    xy = scan_positions(pos, quat, scan_points())
    hits = torch.stack([xy[..., 0], xy[..., 1], ground(xy[..., 0], xy[..., 1])], dim=-1)
    data = SimpleNamespace(pos_w=SimpleNamespace(torch=pos), ray_hits_w=SimpleNamespace(torch=hits))
    env = SimpleNamespace(scene=SimpleNamespace(sensors={"height_scanner": SimpleNamespace(data=data)}))
    theirs = il_height_scan(env, SceneEntityCfg("height_scanner"))
    torch.testing.assert_close(ours, theirs)
    assert OFFSET == 0.5


def test_yaw_alignment_is_isaac_labs():
    from isaaclab.utils.math import yaw_quat

    gen = torch.Generator().manual_seed(1)
    wxyz = torch.nn.functional.normalize(torch.randn(50, 4, generator=gen, dtype=torch.float64), dim=1)
    xyzw = wxyz[:, [1, 2, 3, 0]]
    yaw_only = yaw_quat(xyzw)  # (x, y, z, w) = (0, 0, sin(yaw / 2), cos(yaw / 2))
    theirs = 2 * torch.atan2(yaw_only[:, 2], yaw_only[:, 3])
    diff = torch.remainder(yaw_of(wxyz) - theirs + math.pi, 2 * math.pi) - math.pi
    assert diff.abs().max() < 1e-9
