"""Helpers that load the public descriptions in MuJoCo directly (independent references for the tests)."""

from __future__ import annotations

import re
from pathlib import Path

import mujoco
import numpy as np

ANYMAL_D_LOCKED = ("inspection_payload_mount_to_pan", "inspection_payload_pan_to_tilt")


def load_urdf_in_mujoco(path: Path, locked: tuple[str, ...] = ()) -> mujoco.MjModel:
    """MuJoCo's own URDF import (fixed links fused, meshes dropped), with a free joint on the base."""
    urdf = Path(path).read_text()
    for name in locked:
        urdf = re.sub(rf'(<joint name="{name}" type=")revolute', r"\1fixed", urdf)
    urdf = re.sub(
        r"(<robot[^>]*>)",
        r'\1<mujoco><compiler fusestatic="true" inertiafromgeom="false" discardvisual="true"/></mujoco>',
        urdf, count=1,
    )
    urdf = re.sub(r"<mesh[^>]*/>", '<sphere radius="0.001"/>', urdf)
    spec = mujoco.MjSpec.from_string(urdf)
    spec.worldbody.first_body().add_freejoint()
    return spec.compile()


def joint_names(model: mujoco.MjModel) -> list[str]:
    return [model.joint(i).name for i in range(model.njnt) if model.jnt_type[i] != mujoco.mjtJoint.mjJNT_FREE]


def full_mass_matrix(model: mujoco.MjModel, qpos: np.ndarray) -> np.ndarray:
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    dense = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, dense)  # MuJoCo >= 4 signature: (model, data, dst)
    return dense


def qpos_for(model: mujoco.MjModel, base_pos, base_quat, joints: dict[str, float]) -> np.ndarray:
    qpos = np.zeros(model.nq)
    qpos[:3], qpos[3:7] = base_pos, base_quat
    for name, value in joints.items():
        qpos[model.jnt_qposadr[model.joint(name).id]] = value
    return qpos


def dof_permutation(model: mujoco.MjModel, names: list[str]) -> np.ndarray:
    """Indices into the model's velocity vector: the 6 free DOFs, then the named joints in order."""
    return np.array(list(range(6)) + [model.jnt_dofadr[model.joint(n).id] for n in names])
