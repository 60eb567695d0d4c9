"""The simulation ``Model``: static robot data on the device, batched over ``num_envs`` environments.

Built once from a :class:`~diffloco_ext.assets.RobotDescription` by :func:`build_model`. The topology, joint
frames and axes are shared by all environments; masses, centres of mass, inertias and PD gains are stored per
environment so domain randomisation can change them (and gradients can flow to them). The drives' envelope
(effort limit, saturation effort, no-load speed), joint armature and viscous joint damping are per-env [N, n]
arrays too, for domain randomisation only: the forward pass reads them every step, but no gradient flows to
them (they carry none; write into them, e.g. through ``wp.to_torch``, to randomise).

Generalised coordinates (MuJoCo's free-joint convention, so H and h compare directly with MuJoCo):

* ``q`` (``nq = 7 + n``): base position in the world (m), base orientation as a unit quaternion
  ``(w, x, y, z)`` (base frame -> world), joint positions (rad) in the description's joint order.
* ``u`` (``nv = 6 + n``): base linear velocity in the **world** frame (m/s), base angular velocity in the
  **base** frame (rad/s), joint velocities (rad/s).

The world is z-up with gravity ``(0, 0, -9.81)`` m/s² by default (per env: a randomised or tilted gravity, see
:data:`RANDOMIZABLE`).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np
import warp as wp

from ..assets.robot_description import RobotDescription
from ..assets.rotations import quat_to_matrix
from .adjoint import input_grad
from .body_contacts import CollisionData, collision_data
from .coordinates import BASE_COORDS, BASE_DOFS, dof_of_body
from .terrain import HeightField, TerrainData, terrain_data, terrain_inputs
from .warp_setup import NUMPY_DTYPES, element_type, init_warp, resolve_device, resolve_dtype, warp_struct, warp_types


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    start = np.zeros(len(lists) + 1, dtype=np.int32)
    start[1:] = np.cumsum([len(x) for x in lists])
    flat = np.array([i for x in lists for i in x], dtype=np.int32)
    return start, flat if flat.size else np.zeros(1, dtype=np.int32)


def _device(element: str, ndim: int, doc: str, optional: bool = False):
    """A model array: its element type (:data:`~.warp_setup.ELEMENTS`), dimensions and meaning. The kernels read
    the model through one struct built from these declarations (:meth:`Model.arrays`)."""
    meta = {"element": element, "ndim": ndim, "doc": doc}
    return field(default=None, metadata=meta) if optional else field(metadata=meta)


@dataclass
class Model:
    """Static description of ``num_envs`` copies of one robot, on one device, in one precision.

    Array shapes use ``N`` = num_envs, ``B`` = num_bodies (base = body 0), ``n`` = num_joints (= B - 1,
    joint ``j`` moves body ``j + 1``), ``F`` = number of foot spheres. Every device array is declared with its
    element type and meaning; kernels receive them as one Warp struct, :attr:`arrays`.
    """

    robot: RobotDescription
    num_envs: int
    device: str
    dtype: type
    num_bodies: int
    num_joints: int
    # topology (shared)
    body_parent: wp.array = _device("int32", 1, "[B] parent body, -1 for the base")
    ancestor_start: wp.array = _device("int32", 1, "[B+1] the moving ancestors of body b (itself and the base "
                                                   "excluded): ancestor_index[ancestor_start[b]:ancestor_start[b+1]]")
    ancestor_index: wp.array = _device("int32", 1, "see ancestor_start")
    dof_parent: wp.array = _device("int32", 1, "[nv] the DOF each DOF hangs from (the base DOFs form a chain "
                                               "0-1-...-5), -1 for DOF 0")
    # joint frames (shared): body frame in parent frame at q = 0; joint axis in the body frame
    body_pos0: wp.array = _device("vec3", 1, "[B] body frame origin in the parent frame at q = 0 (m)")
    body_rot0: wp.array = _device("mat33", 1, "[B] body frame orientation in the parent frame at q = 0")
    joint_axis: wp.array = _device("vec3", 1, "[B] joint axis in the body frame (body 0 unused)")
    # mass properties (per env, differentiable)
    body_mass: wp.array = _device("scalar", 2, "[N, B] (kg)")
    body_com: wp.array = _device("vec3", 2, "[N, B] centre of mass, body frame (m)")
    body_inertia: wp.array = _device("mat33", 2, "[N, B] about the com, body frame (kg m^2)")
    # actuators (per env, differentiable gains)
    joint_stiffness: wp.array = _device("scalar", 2, "[N, n] PD k_p (N m / rad)")
    joint_damping: wp.array = _device("scalar", 2, "[N, n] PD k_d (N m s / rad)")
    # drive envelope and passive joint terms (per env, for domain randomisation; no gradients flow to them)
    effort_limit: wp.array = _device("scalar", 2, "[N, n] continuous torque limit E (N m), inf without an actuator")
    saturation_effort: wp.array = _device("scalar", 2, "[N, n] stall torque S of the DC-motor line (N m)")
    velocity_limit: wp.array = _device("scalar", 2, "[N, n] no-load speed v of the DC-motor line (rad/s)")
    joint_armature: wp.array = _device("scalar", 2, "[N, n] rotor inertia added to H's joint diagonal (kg m^2)")
    joint_friction_damping: wp.array = _device("scalar", 2, "[N, n] viscous joint damping d, torque -d qdot "
                                                            "(N m s / rad)")
    # ground (per env): friction coefficient (differentiable) and plane height (m)
    friction: wp.array | None = _device("scalar", 1, "[N] friction coefficient", optional=True)
    ground_height: wp.array | None = _device("scalar", 1, "[N] height of the flat ground (m)", optional=True)
    contact_kappa_scale: wp.array | None = _device("scalar", 1, "[N] factor on the smoothed contact's sharpness kappa "
                                                   "(1): a softer (< 1) or sharper (> 1) ground per env",
                                                   optional=True)
    contact_soft_stiffness: wp.array | None = _device("scalar", 1, "[N] spring stiffness k_p (N/m) of a soft ground "
                                                      "(soft contact's penalty spring, whatever the mode); 0: the "
                                                      "mode's own contact", optional=True)
    # feet
    foot_body: wp.array | None = _device("int32", 1, "[F] body of each foot sphere", optional=True)
    foot_offset: wp.array | None = _device("vec3", 1, "[F] sphere centre in the body frame (m)", optional=True)
    foot_radius: wp.array | None = _device("scalar", 1, "[F] sphere radius (m)", optional=True)
    foot_path_start: wp.array | None = _device("int32", 1, "[F+1] foot f's DOFs, leaf to root (descending), are "
                                                           "foot_path[foot_path_start[f]:foot_path_start[f+1]]",
                                               optional=True)
    foot_path: wp.array | None = _device("int32", 1, "see foot_path_start", optional=True)
    gravity: wp.array | None = _device("vec3", 1, "[N] world frame (m/s^2); per env, read every step", optional=True)
    fixed_base: bool = False  # base welded to the world (for fixed-base checks such as pendulums)
    default_joint_pos: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # terrain (shared by all envs; flat by default, :mod:`.terrain`) and collision bodies (:mod:`.body_contacts`)
    terrain: TerrainData | None = None
    collision: CollisionData | None = None

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        self.__dict__.pop("_arrays", None)  # the kernels' struct is rebuilt from the new field on next use

    @property
    def arrays(self):
        """Every device array of the model, plus ``fixed_base`` (int), the terrain (``terrain_kind`` 0 flat / 1
        height field, ``terrain_heights``, ``terrain_grid``) and the collision capsules (``collision_<name>`` for
        the arrays of :class:`~.body_contacts.CollisionData`), as one Warp struct: the ``# Model`` argument of the
        simulator's kernels (built once per model, and again after a field is assigned)."""
        arrays = self.__dict__.get("_arrays")
        if arrays is None:
            arrays = model_struct_type(self.dtype)()
            for f in _DEVICE_FIELDS:
                value = getattr(self, f.name)
                if value is not None:
                    setattr(arrays, f.name, value)
            if self.collision is not None:
                for f in _COLLISION_FIELDS:
                    setattr(arrays, f"collision_{f.name}", getattr(self.collision, f.name))
            kind, heights, grid = terrain_inputs(self)
            arrays.fixed_base = int(self.fixed_base)
            arrays.terrain_kind = kind
            arrays.terrain_heights = heights
            arrays.terrain_grid = grid
            self.__dict__["_arrays"] = arrays
        return arrays

    @property
    def nq(self) -> int:
        return BASE_COORDS + self.num_joints

    @property
    def nv(self) -> int:
        return BASE_DOFS + self.num_joints

    @property
    def num_feet(self) -> int:
        return 0 if self.foot_body is None else self.foot_body.shape[0]

    @property
    def np_dtype(self):
        return NUMPY_DTYPES[self.dtype]

    def default_q(self, base_height: float | None = None) -> np.ndarray:
        """Default generalised positions ``[N, nq]``: base at the default height, default joint angles."""
        q = np.zeros((self.num_envs, self.nq), dtype=self.np_dtype)
        q[:, 2] = self.robot.default_base_height if base_height is None else base_height
        q[:, 3] = 1.0
        q[:, BASE_COORDS:] = self.default_joint_pos
        return q

    def parameter_arrays(self) -> dict[str, wp.array]:
        """The per-env arrays domain randomisation writes (:data:`RANDOMIZABLE`), by name. The forward pass reads
        them at every step, so a write takes effect at the next step."""
        return {name: getattr(self, name) for name in RANDOMIZABLE}

    def parameter_grads(self, stage: str):
        """The gradient arrays of the differentiable parameters (:data:`RANDOMIZABLE`) as one Warp struct, for a
        reverse kernel of ``stage`` to accumulate into: each parameter's gradient array, or a scratch stand-in
        where it has none (nobody asked for that gradient)."""
        grads = parameter_grads_type(self.dtype)()
        for name in DIFFERENTIABLE:
            setattr(grads, name, input_grad(f"{stage}.{name}", getattr(self, name)))
        return grads

    def with_parameters(self, arrays: dict[str, wp.array]) -> "Model":
        """A shallow copy of the model with some per-env parameter arrays replaced (same shapes and dtypes):
        how one step runs with parameters that are not the model's own (e.g. a task's randomised tensors). The
        model itself when every array given is already its own."""
        for name, array in arrays.items():
            if name not in RANDOMIZABLE:
                raise KeyError(f"'{name}' is not a per-env model parameter: use one of {tuple(RANDOMIZABLE)}")
            own = getattr(self, name)
            if tuple(array.shape) != tuple(own.shape) or array.dtype != own.dtype:
                raise ValueError(f"parameter '{name}': expected shape {tuple(own.shape)} of {own.dtype.__name__}, "
                                 f"got {tuple(array.shape)} of {array.dtype.__name__}")
        if all(array is getattr(self, name) for name, array in arrays.items()):
            return self  # nothing replaced: the same model (and its kernels' struct)
        return dataclasses.replace(self, **arrays)


@functools.cache
def parameter_grads_type(dtype) -> type:
    """The Warp struct of :meth:`Model.parameter_grads` in precision ``dtype``."""
    declared = {f.name: f.metadata for f in _DEVICE_FIELDS}
    fields = {name: wp.array(dtype=element_type(dtype, declared[name]["element"]), ndim=declared[name]["ndim"])
              for name in DIFFERENTIABLE}
    return warp_struct(f"ParameterGrads{'64' if dtype == wp.float64 else '32'}", __name__, fields)


_DEVICE_FIELDS = tuple(f for f in dataclasses.fields(Model) if "element" in f.metadata)
_COLLISION_FIELDS = tuple(f for f in dataclasses.fields(CollisionData) if "element" in f.metadata)


@functools.cache
def model_struct_type(dtype) -> type:
    """The Warp struct of :attr:`Model.arrays` in precision ``dtype`` (from the field declarations)."""
    fields = {f.name: wp.array(dtype=element_type(dtype, f.metadata["element"]), ndim=f.metadata["ndim"])
              for f in _DEVICE_FIELDS}
    fields.update(fixed_base=wp.int32, terrain_kind=wp.int32, terrain_heights=wp.array2d(dtype=dtype),
                  terrain_grid=element_type(dtype, "vec4"))
    for f in _COLLISION_FIELDS:
        fields[f"collision_{f.name}"] = wp.array(dtype=element_type(dtype, f.metadata["element"]),
                                                 ndim=f.metadata["ndim"])
    return warp_struct(f"ModelArrays{'64' if dtype == wp.float64 else '32'}", __name__, fields)


#: Per-env model arrays that domain randomisation may write, with whether gradients flow to them
#: (shapes: ``body_mass`` [N, B], ``body_com`` [N, B] vec3, ``body_inertia`` [N, B] mat33, ``joint_stiffness`` and
#: ``joint_damping`` [N, n], ``friction`` [N], ``gravity`` [N] vec3 (m/s², world frame); the drive envelope
#: ``effort_limit``, ``saturation_effort`` (N m), ``velocity_limit`` (rad/s), ``joint_armature`` (kg m²) and
#: ``joint_friction_damping`` (viscous, N m s/rad), all [N, n], ``contact_kappa_scale`` [N] (the smoothed
#: contact's kappa is ``ContactParams.kappa`` x this; hard and soft contact ignore it) and ``contact_soft_stiffness``
#: [N] (N/m: > 0 puts the env on a soft ground, soft contact's spring, whatever the mode) take no gradient).
RANDOMIZABLE: dict[str, bool] = {
    "body_mass": True,
    "body_com": True,
    "body_inertia": True,
    "joint_stiffness": True,
    "joint_damping": True,
    "friction": True,
    "gravity": False,
    "effort_limit": False,
    "saturation_effort": False,
    "velocity_limit": False,
    "joint_armature": False,
    "joint_friction_damping": False,
    "contact_kappa_scale": False,
    "contact_soft_stiffness": False,
}

#: The parameters gradients flow to.
DIFFERENTIABLE = tuple(name for name, differentiable in RANDOMIZABLE.items() if differentiable)


def build_model(
    robot: RobotDescription,
    num_envs: int = 1,
    *,
    device: str = "cpu",
    dtype="float32",
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81),
    requires_grad: bool = False,
    fixed_base: bool = False,
    friction: float = 1.0,
    ground_height: float = 0.0,
    terrain: HeightField | None = None,
) -> Model:
    """Put ``num_envs`` copies of ``robot`` on ``device`` in precision ``dtype`` (``"float32"``/``"float64"``).

    ``terrain``: a :class:`~.terrain.HeightField` shared by all envs (its surface raised by each env's
    ``ground_height``), or None for flat ground at ``ground_height`` (m)."""
    init_warp()
    device = resolve_device(device)
    dtype = resolve_dtype(dtype)
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    for joint in robot.joints:
        if joint.type != "revolute":
            raise NotImplementedError(f"joint '{joint.name}': only revolute joints are simulated so far")
    t = warp_types(dtype)
    npd = NUMPY_DTYPES[dtype]
    nb, n = robot.num_bodies, robot.num_joints
    parent = robot.parent_indices()

    ancestors = []
    for b in range(nb):
        chain, a = [], parent[b]
        while a > 0:
            chain.append(int(a))
            a = parent[a]
        ancestors.append(chain)
    base_chain = list(range(-1, BASE_DOFS - 1))  # base DOF k hangs from k - 1
    joint_parents = [dof_of_body(int(parent[b])) if parent[b] > 0 else BASE_DOFS - 1 for b in range(1, nb)]
    dof_parent = np.array(base_chain + joint_parents, dtype=np.int32)
    anc_start, anc_idx = _csr(ancestors)

    def arr(values, wtype, shape=None):
        return wp.array(np.asarray(values, dtype=npd).reshape(shape) if shape else np.asarray(values, dtype=npd),
                        dtype=wtype, device=device, requires_grad=requires_grad)

    def tiled(values):
        return np.broadcast_to(np.asarray(values, dtype=npd), (num_envs, *np.shape(values))).copy()

    def per_joint(values):
        """A per-env [N, n] array (no gradient) from a scalar or a per-joint list."""
        return wp.array(np.broadcast_to(np.asarray(values, dtype=npd), (num_envs, n)).copy(), dtype=dtype,
                        device=device)

    rot0 = np.array([quat_to_matrix(b.quat) for b in robot.bodies])
    axes = np.array([[1.0, 0.0, 0.0]] + [list(j.axis) for j in robot.joints])
    act = robot.actuator
    kp = 0.0 if act is None else act.stiffness
    kd = 0.0 if act is None else act.damping
    feet = robot.feet
    foot_kwargs = {}
    if feet:
        paths = []
        for f in feet:
            b = robot.body_index(f.body)
            chain = []
            while b > 0:
                chain.append(dof_of_body(int(b)))
                b = parent[b]
            paths.append(chain + list(range(BASE_DOFS - 1, -1, -1)))
        path_start, path_flat = _csr(paths)
        foot_kwargs = dict(
            foot_path_start=wp.array(path_start, dtype=wp.int32, device=device),
            foot_path=wp.array(path_flat, dtype=wp.int32, device=device),
            foot_body=wp.array(np.array([robot.body_index(f.body) for f in feet], dtype=np.int32), dtype=wp.int32,
                               device=device),
            foot_offset=wp.array(np.array([f.offset for f in feet], dtype=npd), dtype=t.vec3, device=device),
            foot_radius=wp.array(np.array([f.radius for f in feet], dtype=npd), dtype=dtype, device=device),
        )
    shared = dict(device=device)
    return Model(
        robot=robot,
        num_envs=num_envs,
        device=device,
        dtype=dtype,
        num_bodies=nb,
        num_joints=n,
        body_parent=wp.array(parent, dtype=wp.int32, **shared),
        ancestor_start=wp.array(anc_start, dtype=wp.int32, **shared),
        ancestor_index=wp.array(anc_idx, dtype=wp.int32, **shared),
        dof_parent=wp.array(dof_parent, dtype=wp.int32, **shared),
        body_pos0=wp.array(np.array([b.pos for b in robot.bodies], dtype=npd), dtype=t.vec3, **shared),
        body_rot0=wp.array(rot0.astype(npd), dtype=t.mat33, **shared),
        joint_axis=wp.array(axes.astype(npd), dtype=t.vec3, **shared),
        body_mass=arr(tiled([b.mass for b in robot.bodies]), dtype),
        body_com=arr(tiled([b.com for b in robot.bodies]), t.vec3),
        body_inertia=arr(tiled([b.inertia_matrix for b in robot.bodies]), t.mat33),
        joint_stiffness=arr(np.full((num_envs, n), kp), dtype),
        joint_damping=arr(np.full((num_envs, n), kd), dtype),
        effort_limit=per_joint(np.inf if act is None else act.effort_limit),
        saturation_effort=per_joint(np.inf if act is None else act.saturation_effort),
        velocity_limit=per_joint(np.inf if act is None else act.velocity_limit),
        joint_armature=per_joint([j.armature for j in robot.joints]),
        joint_friction_damping=per_joint([j.damping for j in robot.joints]),
        gravity=wp.array(tiled(np.asarray(gravity, dtype=float)), dtype=t.vec3, device=device),
        fixed_base=fixed_base,
        friction=arr(np.full(num_envs, friction), dtype),
        ground_height=wp.array(np.full(num_envs, ground_height, dtype=npd), dtype=dtype, device=device),
        contact_kappa_scale=wp.array(np.ones(num_envs, dtype=npd), dtype=dtype, device=device),
        contact_soft_stiffness=wp.array(np.zeros(num_envs, dtype=npd), dtype=dtype, device=device),
        default_joint_pos=robot.default_joint_positions().astype(npd),
        **foot_kwargs,
        terrain=terrain_data(terrain, dtype, device),
        collision=collision_data(robot, dtype, device),
    )
