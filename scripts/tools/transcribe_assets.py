"""Developer tool: transcribe robot figures from public descriptions into the project's own definitions.

Writes ``diffloco_ext/assets/definitions/_<robot>_figures.py`` (literal numbers: body frames, masses, centres
of mass, inertias, joint axes/limits, foot spheres, collision capsules) from the public files in
``../shared/assets``. The package never reads ``../shared`` at run time; this script is run by a developer when a
source description changes, and ``tests/assets`` checks the committed figures against the sources.

    python scripts/tools/transcribe_assets.py [--shared ../shared/assets]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import mujoco
import numpy as np

from diffloco_ext.assets.collision_approximation import primitive_capsules
from diffloco_ext.assets.rotations import principal_inertia_to_matrix, quat_to_matrix
from diffloco_ext.assets.urdf_importer import import_urdf

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "diffloco_ext" / "assets" / "definitions"


def _f(x) -> str:
    x = float(x)
    if np.isinf(x):
        return "INF" if x > 0 else "-INF"
    return repr(x)


def _value(v) -> str:
    if isinstance(v, str):
        return v if v.startswith("(") else repr(v)
    return _f(v)


def _vec(v) -> str:
    return "(" + ", ".join(_f(x) for x in v) + ")"


def _mat(m) -> str:
    return "(" + ", ".join(_vec(row) for row in np.asarray(m)) + ")"


def _write(path: Path, header: str, bodies: list[dict], feet: list[dict], shapes: list[dict]) -> None:
    lines = [f'"""{header}"""', "", "INF = float(\"inf\")", "", "# fmt: off", "BODIES = ("]
    for b in bodies:
        j = b["joint"]
        jtxt = "None" if j is None else (
            "dict(" + ", ".join(f"{k}={_value(v)}" for k, v in j.items()) + ")"
        )
        lines.append(
            f"    dict(name={b['name']!r}, parent={b['parent']!r}, pos={_vec(b['pos'])}, quat={_vec(b['quat'])},\n"
            f"         mass={_f(b['mass'])}, com={_vec(b['com'])},\n"
            f"         inertia={_mat(b['inertia'])},\n"
            f"         joint={jtxt}),"
        )
    lines.append(")")
    lines.append("FEET = (")
    for ft in feet:
        lines.append(f"    dict(name={ft['name']!r}, body={ft['body']!r}, offset={_vec(ft['offset'])}, "
                     f"radius={_f(ft['radius'])}),")
    lines.append(")")
    lines.append("# Capsules (start, end in the body frame, m; radius m) inside the source's collision primitives,")
    lines.append("# foot spheres left out (see diffloco_ext/assets/collision_approximation.py).")
    lines.append("COLLISION_SHAPES = (")
    for c in shapes:
        lines.append(
            f"    dict(body={c['body']!r}, start={_vec(c['start'])}, end={_vec(c['end'])}, radius={_f(c['radius'])},\n"
            f"         source={c['source']!r}),"
        )
    lines.append(")")
    lines.append("# fmt: on")
    path.write_text("\n".join(lines) + "\n")


def _is_foot(kind, size, body, pos, feet) -> bool:
    return kind == "sphere" and any(f["body"] == body and np.allclose(f["offset"], pos, atol=1e-9)
                                    and abs(f["radius"] - size[0]) < 1e-9 for f in feet)


def _capsule_dicts(body: str, kind: str, size, rot, pos, source: str) -> list[dict]:
    return [dict(body=body, start=a, end=b, radius=r, source=source)
            for a, b, r in primitive_capsules(kind, size, rot, pos)]


def _joint_dict(name, axis, lower, upper, effort, velocity, damping, armature, friction) -> dict:
    return dict(name=name, axis=_vec(axis), lower=float(lower), upper=float(upper), effort_limit=float(effort),
                velocity_limit=float(velocity), damping=float(damping), armature=float(armature),
                friction=float(friction))


def anymal_c_from_mjcf(shared: Path) -> None:
    model = mujoco.MjModel.from_xml_path(str(shared / "anymal_c" / "anymal_c_mjcf_physics_only.xml"))
    bodies, feet, shapes = [], [], []
    kinds = {int(mujoco.mjtGeom.mjGEOM_SPHERE): "sphere", int(mujoco.mjtGeom.mjGEOM_CAPSULE): "capsule",
             int(mujoco.mjtGeom.mjGEOM_CYLINDER): "cylinder", int(mujoco.mjtGeom.mjGEOM_BOX): "box"}
    for b in range(1, model.nbody):
        parent = model.body_parentid[b]
        joint = None
        if parent != 0:
            jid = model.body_jntadr[b]
            dof = model.jnt_dofadr[jid]
            act = [a for a in range(model.nu) if model.actuator_trnid[a, 0] == jid]
            effort = model.actuator_forcerange[act[0], 1] if act else np.inf
            joint = _joint_dict(model.joint(jid).name, model.jnt_axis[jid], *model.jnt_range[jid], effort,
                                7.5, model.dof_damping[dof], model.dof_armature[dof], model.dof_frictionloss[dof])
        is_base = parent == 0
        bodies.append(dict(
            name=model.body(b).name, parent=None if is_base else model.body(parent).name,
            pos=(0.0, 0.0, 0.0) if is_base else model.body_pos[b],
            quat=(1.0, 0.0, 0.0, 0.0) if is_base else model.body_quat[b],
            mass=model.body_mass[b], com=model.body_ipos[b],
            inertia=principal_inertia_to_matrix(model.body_inertia[b], model.body_iquat[b]), joint=joint,
        ))
        for g in range(model.ngeom):
            if model.geom_bodyid[g] == b and model.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE:
                feet.append(dict(name=model.body(b).name.replace("SHANK", "FOOT"), body=model.body(b).name,
                                 offset=model.geom_pos[g], radius=model.geom_size[g, 0]))
    for g in range(model.ngeom):
        kind = kinds.get(int(model.geom_type[g]))
        b = model.geom_bodyid[g]
        if kind is None or b == 0:
            continue
        body, size = model.body(b).name, model.geom_size[g]
        if _is_foot(kind, size, body, model.geom_pos[g], feet):
            continue
        size = size[:{"sphere": 1, "capsule": 2, "cylinder": 2, "box": 3}[kind]]
        source = f"geom {g} {kind} size {' '.join(f'{v:.6g}' for v in size)}"
        shapes += _capsule_dicts(body, kind, size, quat_to_matrix(model.geom_quat[g]), model.geom_pos[g], source)
    _write(OUT / "_anymal_c_figures.py",
           "ANYmal C figures transcribed from MuJoCo Menagerie `anybotics_anymal_c/anymal_c.xml` (BSD-3-Clause,\n"
           "ANYbotics / Google DeepMind), via scripts/tools/transcribe_assets.py. "
           "Frames and units: see robot_description.",
           bodies, feet, shapes)


def from_urdf(path: Path, out: str, header: str, locked=(), foot_sphere=None) -> None:
    imp = import_urdf(path, locked_joints=locked)
    bodies = []
    for b in imp.robot.bodies:
        j = b.joint
        bodies.append(dict(
            name=b.name, parent=b.parent, pos=b.pos, quat=b.quat, mass=b.mass, com=b.com, inertia=b.inertia,
            joint=None if j is None else _joint_dict(j.name, j.axis, j.lower, j.upper, j.effort_limit,
                                                     j.velocity_limit, j.damping, j.armature, j.friction),
        ))
    feet = [dict(name=s.link, body=s.body, offset=s.center, radius=s.radius) for s in imp.spheres]
    if foot_sphere is not None:
        feet = foot_sphere(imp.robot)
    shapes = []
    for c in imp.collisions:
        if _is_foot(c.kind, c.size, c.body, c.pos, feet):
            continue
        source = f"{c.link} {c.kind} size {' '.join(f'{v:.6g}' for v in c.size)}"
        shapes += _capsule_dicts(c.body, c.kind, c.size, np.array(c.rot), np.array(c.pos), source)
    _write(OUT / out, header, bodies, feet, shapes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "assets",
                        help="folder of the public descriptions (anymal_c/, anymal_d/, warp_quadruped/)")
    args = parser.parse_args(argv)
    if not args.shared.is_dir():
        parser.error(f"--shared: no folder {args.shared}")
    OUT.mkdir(parents=True, exist_ok=True)
    anymal_c_from_mjcf(args.shared)
    from_urdf(
        args.shared / "anymal_d" / "anymal_d.urdf", "_anymal_d_figures.py",
        "ANYmal D figures computed from ANYbotics `anymal_d_simple_description` (release 25.03, BSD-3-Clause):\n"
        "fixed sub-links merged into their moving parent, the inspection payload's pan/tilt joints locked.\n"
        "Written by scripts/tools/transcribe_assets.py. Frames and units: see robot_description.",
        locked=("inspection_payload_mount_to_pan", "inspection_payload_pan_to_tilt"),
    )

    def quadruped_feet(robot):
        # The source has no foot geometry: the shank is a 0.25 m cylinder of radius 0.02 m; we put the
        # contact sphere (radius 0.02 m) at the shank tip, 0.25 m down the shank frame's -z axis.
        return [dict(name=b.name.replace("SHANK", "FOOT"), body=b.name, offset=(0.0, 0.0, -0.25), radius=0.02)
                for b in robot.bodies if b.name.endswith("SHANK")]

    from_urdf(
        args.shared / "warp_quadruped" / "quadruped.urdf", "_warp_quadruped_figures.py",
        "Warp quadruped figures from the `quadruped.urdf` of NVIDIA Warp's / Newton's examples (Apache-2.0).\n"
        "Foot spheres are the project's choice (see scripts/tools/transcribe_assets.py). Written by that script.",
        foot_sphere=quadruped_feet,
    )
    print(f"wrote figures to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
