"""Installation script for the ``diffloco_ext`` Isaac Lab extension.

Name, version, description, keywords, authors and license are read from ``extension.toml`` so they are
written in one place only.
"""

import tomllib
from pathlib import Path

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
    "test": ["pytest", "pytest-timeout", "hypothesis", "onnxruntime", "scipy", "ruff==0.16.9"],
    # Isaac Lab 3.0 (docs/isaaclab.md). It declares Python >= 3.12: there (a real Isaac Lab installation) this
    # extra installs it. On Python 3.11 an unpinned "isaaclab" would resolve to 2.3.2, which needs Isaac Sim, and
    # 3.0 installs only without its dependencies: the extra is empty there and `make setup` installs the kit-less
    # stack from config/isaaclab/ instead.
    "isaaclab": ['isaaclab==3.0.0; python_version >= "3.12"'],
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
    # Isaac Lab discovers external tasks through this group and imports each module on every `isaaclab` command
    # (so both register with string entry points only and stay light): the differentiable tasks, and their
    # Isaac Lab versions (DiffLoco-*-Isaac).
    entry_points={"isaaclab.tasks": ["diffloco = diffloco_ext.tasks",
                                     "diffloco_isaaclab = diffloco_ext.isaaclab.tasks"]},
    zip_safe=False,
)
