"""ANYmal D (ANYbotics), the project's primary robot: 57.03 kg with the inspection payload locked.

Figures from ANYbotics' ``anymal_d_simple_description`` release 25.03 (BSD-3-Clause), fixed sub-links merged;
drive model from Isaac Lab's simple ANYdrive config; default pose and base height (0.6 m) from Isaac Lab's
ANYmal config.
"""

from . import ANYDRIVE_3, _anymal_d_figures, anymal_default_joint_pos, build_robot


def anymal_d():
    return build_robot(
        "anymal_d", _anymal_d_figures, actuator=ANYDRIVE_3, default_joint_pos=anymal_default_joint_pos(),
        default_base_height=0.6,
        source="ANYbotics anymal_d_simple_description 25.03 (BSD-3-Clause); ANYdrive model after Isaac Lab",
    )
