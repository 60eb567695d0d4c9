"""Export a shipped robot to MJCF and print its mass properties.

    python scripts/export_robot.py --robot anymal_d --out outputs/robots
"""

from __future__ import annotations

import argparse
from pathlib import Path

import mujoco
import numpy as np

from diffloco_ext.assets import ROBOTS, get_robot
from diffloco_ext.assets.mjcf_exporter import ACTUATOR_KINDS, to_mjcf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="anymal_d", choices=sorted(ROBOTS))
    parser.add_argument("--out", type=Path, default=Path("outputs/robots"))
    parser.add_argument("--actuators", default="position", choices=ACTUATOR_KINDS)
    args = parser.parse_args()

    robot = get_robot(args.robot)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{robot.name}.xml"
    path.write_text(to_mjcf(robot, actuators=args.actuators))
    model = mujoco.MjModel.from_xml_path(str(path))
    print(f"{robot.name}: {robot.num_bodies} bodies, {robot.num_joints} joints, {robot.total_mass:.3f} kg "
          f"({robot.source})")
    for body in robot.bodies:
        eig = np.linalg.eigvalsh(body.inertia_matrix)
        print(f"  {body.name:10s} {body.mass:8.4f} kg  principal inertia {np.array2string(eig, precision=5)}")
    print(f"wrote {path} (MuJoCo: nq={model.nq}, nv={model.nv}, nu={model.nu})")


if __name__ == "__main__":
    main()
