"""Headless video of robot states with MuJoCo's offscreen renderer (EGL, else OSMesa; no display needed).

    frames = render_states(robot, qs, width=640, height=360)   # qs [T, nq] in the simulator's conventions
    write_mp4(frames, "play.mp4", fps=50)

The robot is the MJCF exported from its description with the collision capsules as visual geometry, on a
checkered floor, followed by a tracking camera.
"""

from __future__ import annotations

import os

import numpy as np


def _gl_context(width: int, height: int):
    """A current offscreen OpenGL context: EGL (GPU or Mesa), else OSMesa."""
    errors = []
    for platform in ("egl", "osmesa"):
        os.environ.setdefault("PYOPENGL_PLATFORM", platform)
        try:
            if platform == "egl":
                from mujoco.egl import GLContext
            else:
                from mujoco.osmesa import GLContext
            context = GLContext(width, height)
            context.make_current()
            return context
        except Exception as err:  # noqa: BLE001 - try the next platform, report all if none works
            errors.append(f"{platform}: {err}")
            os.environ.pop("PYOPENGL_PLATFORM", None)
    raise RuntimeError("no offscreen OpenGL for rendering (" + "; ".join(errors) + "): install Mesa's EGL "
                       "(Debian: libegl1 libgl1-mesa-dri) or OSMesa (libosmesa6)")


def render_states(robot, qs: np.ndarray, width: int = 640, height: int = 360, distance: float = 2.5,
                  elevation: float = -20.0, azimuth: float = 135.0, shadows: bool = True, terrain=None) -> np.ndarray:
    """RGB frames [T, height, width, 3] (uint8) of the states ``qs`` [T, nq] (``shadows``: shadows and the
    floor's reflection, which cost most of a frame on a software renderer) on flat ground or on ``terrain`` (a
    generated terrain: its height field, shaded by the checker material)."""
    import mujoco

    from ..assets.mjcf_exporter import to_mjspec

    field = None if terrain is None else (terrain.heights, terrain.origin_xy, terrain.cfg.resolution)
    spec = to_mjspec(robot, field, actuators="none", visuals=True)
    spec.worldbody.add_light(pos=[0, 0, 3], dir=[0, 0, -1], diffuse=[0.8, 0.8, 0.8])
    texture = spec.add_texture(name="grid", type=mujoco.mjtTexture.mjTEXTURE_2D,
                               builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER, rgb1=[0.45, 0.5, 0.55],
                               rgb2=[0.3, 0.33, 0.36], width=300, height=300)
    material = spec.add_material(name="grid", texrepeat=[8, 8])
    material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = texture.name
    for geom in spec.worldbody.geoms:
        if geom.name == "floor":
            geom.material = "grid"
            geom.size = [50, 50, 0.05]
        if geom.name == "terrain":
            geom.material = "grid"
    model = spec.compile()
    if terrain is not None:  # the scene's light sits above the world origin: the camera's light shows the tiles
        model.vis.headlight.diffuse[:] = 0.6
        model.vis.headlight.ambient[:] = 0.3
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
    model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    data = mujoco.MjData(model)
    context = _gl_context(width, height)
    try:
        scene = mujoco.MjvScene(model, maxgeom=2000)
        # software GL (llvmpipe, OSMesa) spends most of a frame on shadows and the floor's reflection
        scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = shadows
        scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = shadows
        mjr = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, mjr)
        viewport = mujoco.MjrRect(0, 0, width, height)
        camera = mujoco.MjvCamera()
        camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        camera.distance, camera.elevation, camera.azimuth = distance, elevation, azimuth
        option = mujoco.MjvOption()
        option.geomgroup[:] = 1
        frames = np.empty((len(qs), height, width, 3), dtype=np.uint8)
        for t, q in enumerate(qs):
            data.qpos[:] = q
            mujoco.mj_forward(model, data)
            camera.lookat[:] = [q[0], q[1], 0.4 if terrain is None else q[2] - 0.15]
            mujoco.mjv_updateScene(model, data, option, None, camera, mujoco.mjtCatBit.mjCAT_ALL, scene)
            mujoco.mjr_render(viewport, scene, mjr)
            mujoco.mjr_readPixels(frames[t], None, viewport, mjr)
            frames[t] = frames[t][::-1]
        mjr.free()
    finally:
        context.free()
    return frames


def write_mp4(frames: np.ndarray, path: str, fps: float = 50.0) -> str:
    """Write RGB frames [T, H, W, 3] as an H.264 MP4 (imageio with its bundled ffmpeg). Returns the path."""
    import imageio.v2 as imageio

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with imageio.get_writer(path, fps=fps, codec="libx264", quality=7, macro_block_size=8) as writer:
        for frame in frames:
            writer.append_data(frame)
    return path
