"""``StepData``: the intermediates of one simulator step, composed of the stages' own groups.

Each stage module declares the dataclass of what it computes (:mod:`.stage_data`); a step holds one of each, in
the order the step computes them (:mod:`.simulator`). Every intermediate is also reachable by its own name
(``data.H`` is ``data.mass.H``, ``data.contact.weight`` is ``data.contact.solution.weight``). Allocation,
zeroing of the reused buffers, gradient attachment and ``nbytes`` iterate the groups' declarations.
"""

from __future__ import annotations

from dataclasses import dataclass

import warp as wp

from .actuators import ActuationData
from .bias_forces import BiasForceData
from .cholesky import SolveData
from .contact import ContactGeometryData
from .contact_velocity import ContactVelocityData
from .delassus import DelassusData
from .divergence import DivergenceData
from .gauss_seidel import GaussSeidelData
from .impulse_response import ImpulseResponseData
from .integrator import IntegratorData
from .kinematics import KinematicsData
from .mass_matrix import MassMatrixData
from .stage_data import Sizes, StageData, intermediate, stage_group


@dataclass
class ContactData(StageData):
    """The contact stages' intermediates of one step, in the order the step computes them: candidates at the
    midpoint (``geometry``: gaps, frames, contact rows), contact-point velocities without impulses
    (``velocity``), the Delassus matrix (``delassus``), the solve (``solution``: weights, iterates, impulses,
    forces) and the impulses' velocity change (``response``)."""

    geometry: ContactGeometryData = stage_group(ContactGeometryData)
    velocity: ContactVelocityData = stage_group(ContactVelocityData)
    delassus: DelassusData = stage_group(DelassusData)
    solution: GaussSeidelData = stage_group(GaussSeidelData)
    response: ImpulseResponseData = stage_group(ImpulseResponseData)


@dataclass
class StepData(StageData):
    """Intermediate results of one step, kept per step for its backward pass.

    Groups: ``integration`` (midpoint and end configurations, end velocity), ``kin`` (kinematics at the
    midpoint), ``mass`` (inertias, H), ``bias_forces``, ``actuation`` (drive branches and torques, the step's
    impulse), ``solve`` (factor of H', velocity change), ``contact`` (geometry, contact-point velocities,
    Delassus matrix, impulses, force; ``None`` without contact), ``guard`` (diverged flags). ``body_gap`` [N, K]:
    the collision bodies' gaps at the end-of-step state when the simulator reports them (values only), else
    ``None``.
    """

    integration: IntegratorData = stage_group(IntegratorData)
    kin: KinematicsData = stage_group(KinematicsData)
    mass: MassMatrixData = stage_group(MassMatrixData)
    bias_forces: BiasForceData = stage_group(BiasForceData)
    actuation: ActuationData = stage_group(ActuationData)
    solve: SolveData = stage_group(SolveData)
    contact: ContactData | None = stage_group(ContactData, when=lambda s: s.contact)
    guard: DivergenceData = stage_group(DivergenceData)
    body_gap: wp.array | None = intermediate(lambda s: (s.N, s.K), values_only=True, when=lambda s: s.body_gaps,
                                             doc="collision-body gaps at the end-of-step state (m)")

    @classmethod
    def allocate(cls, model, requires_grad: bool = False, contact=None, body_gaps: bool = False) -> "StepData":
        """Fresh intermediates of one step of ``model`` under contact settings ``contact`` (None: no contact),
        with room for the collision-body gaps when ``body_gaps``."""
        return super().allocate(model, Sizes.of(model, contact, body_gaps), requires_grad)
