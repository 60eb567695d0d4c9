"""Export a shipped robot to MJCF (MuJoCo's XML) and print its mass properties.

    .venv/bin/python scripts/export_robot.py --robot anymal_d --out outputs/robots
    .venv/bin/python scripts/export_robot.py --robot anymal_c --actuators motor

Writes ``<out>/<robot>.xml`` (bodies, joints, inertias, collision shapes and actuators of the project's robot
description), loads it back in MuJoCo and prints each body's mass and principal inertia. A folder that cannot be
written is a one-line error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import mujoco
import numpy as np

from diffloco_ext.assets import ROBOTS, get_robot
from diffloco_ext.assets.mjcf_exporter import ACTUATOR_KINDS, to_mjcf


def main(argv: list[str] | None = None) -> Path:
    """Export the robot; returns the path of the MJCF file."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="anymal_d", choices=sorted(ROBOTS))
    parser.add_argument("--out", type=Path, default=Path("outputs/robots"), help="folder of the MJCF file")
    parser.add_argument("--actuators", default="position", choices=ACTUATOR_KINDS,
                        help="MuJoCo actuators of the joints (default: position, the PD drive)")
    args = parser.parse_args(argv)

    robot = get_robot(args.robot)
    path = args.out / f"{robot.name}.xml"
    try:
        xml = to_mjcf(robot, actuators=args.actuators)
    except ValueError as err:  # e.g. actuators asked of a robot without actuator parameters
        parser.error(str(err))
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_text(xml)
    except OSError as err:
        raise SystemExit(f"error: cannot write {path}: {err.strerror or err}") from None
    model = mujoco.MjModel.from_xml_path(str(path))
    print(f"{robot.name}: {robot.num_bodies} bodies, {robot.num_joints} joints, {robot.total_mass:.3f} kg "
          f"({robot.source})")
    for body in robot.bodies:
        eig = np.linalg.eigvalsh(body.inertia_matrix)
        print(f"  {body.name:10s} {body.mass:8.4f} kg  principal inertia {np.array2string(eig, precision=5)}")
    print(f"wrote {path} (MuJoCo: nq={model.nq}, nv={model.nv}, nu={model.nu})")
    return path


if __name__ == "__main__":
    main(sys.argv[1:])
