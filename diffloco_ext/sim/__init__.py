"""Differentiable rigid-body simulation in NVIDIA Warp (floating-base articulations, Moreau time stepping).

>>> from diffloco_ext.assets import get_robot
>>> from diffloco_ext.sim import build_model, Simulator
>>> model = build_model(get_robot("anymal_d"), num_envs=64, dtype="float32", device="cpu")
>>> sim = Simulator(model, dt=0.005)
>>> s0, s1 = sim.state(), sim.empty_state()
>>> sim.step(s0, sim.control(), s1)
"""

from .model import Model, build_model
from .simulator import Simulator, StepData
from .state import Control, State

__all__ = ["Model", "build_model", "Simulator", "StepData", "State", "Control"]
