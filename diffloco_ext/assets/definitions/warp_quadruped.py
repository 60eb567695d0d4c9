"""The small "Warp quadruped" of NVIDIA Warp's and Newton's examples: 6.22 kg base, twelve 2.04 kg links.

Figures from its ``quadruped.urdf`` (Apache-2.0). Schwarke et al. (arXiv 2404.02887) §A.2 cap its PD torques at 20 N·m.
The PD gains (k_p 100 N·m/rad, k_d 2 N·m·s/rad), the foot spheres (r = 0.02 m at the shank tips) and the default pose
(the initial pose of Warp's quadruped example) are the project's choices.
"""

from ..robot_description import ActuatorParams
from . import _warp_quadruped_figures, build_robot

WARP_QUADRUPED_DRIVE = ActuatorParams(stiffness=100.0, damping=2.0, effort_limit=20.0, saturation_effort=20.0,
                                      velocity_limit=20.0)


def warp_quadruped():
    pose = {}
    for leg, (haa, hfe, kfe) in {"LF": (0.2, 0.4, -0.6), "RF": (-0.2, -0.4, 0.6),
                                 "LH": (-0.2, 0.4, -0.6), "RH": (0.2, -0.4, 0.6)}.items():
        pose.update({f"{leg}_HAA": haa, f"{leg}_HFE": hfe, f"{leg}_KFE": kfe})
    return build_robot(
        "warp_quadruped", _warp_quadruped_figures, actuator=WARP_QUADRUPED_DRIVE, default_joint_pos=pose,
        default_base_height=0.5,
        source="NVIDIA Warp / Newton examples quadruped.urdf (Apache-2.0); drive, feet and pose: project choice",
    )
