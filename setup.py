"""Installation script for the ``diffloco_ext`` Isaac Lab extension.

Name, version, description, keywords, authors and license are read from ``extension.toml`` so they are
written in one place only.
"""

from pathlib import Path
import tomllib

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent
EXTENSION = tomllib.loads((ROOT / "extension.toml").read_text())["package"]

# Unpinned on purpose: users install into an Isaac Lab environment that brings its own torch and warp.
# The test environment's pins live in config/constraints-test.txt.
INSTALL_REQUIRES = [
    "warp-lang>=1.17",
    "torch>=2.6",
    "rsl-rl-lib>=5.5",
    "numpy",
    "mujoco>=3.3",
    "gymnasium",
    "matplotlib",
    "tensorboard",
    "pyyaml",
    "onnx",
    "onnxscript",
    "onnxruntime",
    "imageio",
    "imageio-ffmpeg",
]

EXTRAS_REQUIRE = {
    "test": ["pytest", "pytest-timeout", "hypothesis", "onnxruntime", "scipy"],
    # Isaac Lab 3.0 itself (kit-less Newton backend) for sim-to-sim validation; see README. Pinned: on Python
    # 3.11 an unpinned "isaaclab" resolves to 2.3.2, which needs Isaac Sim (3.0 declares Python >= 3.12).
    "isaaclab": ["isaaclab==3.0.0"],
}

setup(
    name="diffloco_ext",
    version=EXTENSION["version"],
    description=EXTENSION["description"],
    keywords=EXTENSION["keywords"],
    author=", ".join(EXTENSION["authors"]),
    license=EXTENSION["license"],
    python_requires=">=3.10",
    packages=find_packages(include=["diffloco_ext", "diffloco_ext.*"]),
    include_package_data=True,
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    # Isaac Lab discovers external tasks through this group and imports the module on every `isaaclab` command
    # (so diffloco_ext.tasks registers with string entry points only and stays light).
    entry_points={"isaaclab.tasks": ["diffloco = diffloco_ext.tasks"]},
    zip_safe=False,
)
