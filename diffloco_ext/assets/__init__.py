"""Robot assets: the description data model, URDF import, MJCF export and the shipped robots.

>>> from diffloco_ext.assets import get_robot
>>> robot = get_robot("anymal_d")
"""

from .definitions.anymal_c import anymal_c
from .definitions.anymal_d import anymal_d
from .definitions.warp_quadruped import warp_quadruped
from .robot_description import (
    ActuatorParams,
    Body,
    CollisionShape,
    FootSphere,
    Joint,
    RobotDescription,
    RobotDescriptionError,
)
from .urdf_importer import import_urdf

ROBOTS = {"anymal_d": anymal_d, "anymal_c": anymal_c, "warp_quadruped": warp_quadruped}


def get_robot(name: str) -> RobotDescription:
    """A shipped robot by name (``anymal_d``, ``anymal_c``, ``warp_quadruped``)."""
    try:
        factory = ROBOTS[name]
    except KeyError:
        raise KeyError(f"unknown robot '{name}'; known robots: {sorted(ROBOTS)}") from None
    return factory()


__all__ = [
    "ActuatorParams", "Body", "CollisionShape", "FootSphere", "Joint", "RobotDescription", "RobotDescriptionError",
    "ROBOTS",
    "get_robot", "import_urdf",
]
