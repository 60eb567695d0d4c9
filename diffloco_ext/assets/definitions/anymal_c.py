"""ANYmal C (ANYbotics), as MuJoCo Menagerie describes it: 44.965 kg, 12 joints, foot spheres r = 0.03 m.

Figures from Menagerie's ``anybotics_anymal_c`` (BSD-3-Clause); drive model from Isaac Lab's simple ANYdrive
config; default pose from Isaac Lab's ANYmal config.
"""

from . import ANYDRIVE_3, _anymal_c_figures, anymal_default_joint_pos, build_robot


def anymal_c():
    return build_robot(
        "anymal_c", _anymal_c_figures, actuator=ANYDRIVE_3, default_joint_pos=anymal_default_joint_pos(),
        default_base_height=0.6,
        source="MuJoCo Menagerie anybotics_anymal_c (BSD-3-Clause); ANYdrive model after Isaac Lab",
    )
