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
]

EXTRAS_REQUIRE = {
    "test": ["pytest", "pytest-timeout", "hypothesis", "onnxruntime", "scipy"],
    # Isaac Lab itself (kit-less Newton backend) for sim-to-sim validation; see README.
    "isaaclab": ["isaaclab"],
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
    # The "isaaclab.tasks" entry point (diffloco = diffloco_ext.tasks) is added when the tasks package exists.
    zip_safe=False,
)
