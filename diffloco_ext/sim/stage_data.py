"""How a stage declares its intermediates: a dataclass of arrays, each field declared with its shape, element type
and lifetime rules, plus the Warp struct that carries the group into kernels.

Every stage module owns one :class:`StageData` subclass (e.g. :class:`~.mass_matrix.MassMatrixData`) whose fields
are declared by :func:`intermediate`: the shape (from the model's :class:`Sizes`), the element type, whether the
array must start at zero (a stage adds into it or writes it in part) and whether a gradient flows through it (the
``values_only`` ones are read by hand-written reverse passes only, so a taped step keeps their values and nothing
else). Groups nest through :func:`stage_group` (:class:`~.step_data.StepData` composes the stages' groups).
Allocation, zeroing of reused buffers, gradient attachment, ``nbytes`` and the Warp structs all iterate these
declarations: no list of names elsewhere decides them.

What a stage reads is declared the same way, by a :class:`StageInputs` dataclass (:func:`stage_input`: state
arrays, other stages' groups, scalars). A stage's kernels all take three struct arguments, ``(model, inputs,
outputs)``: :attr:`~.model.Model.arrays`, :meth:`StageInputs.values` and the stage's own group's
:attr:`StageData.values`. Its reverse kernel takes the same three, then the inputs' gradients
(:meth:`StageInputs.grads`, the same struct type) and the outputs' (:attr:`StageData.grads`; null arrays for the
``values_only`` fields). So every signature is written once, one argument list builds both launches
(:func:`~.adjoint.launch_stage`), and a launch packs a few structs instead of tens of arrays (a launch of a dozen
arrays cost ~50 µs of Python, one of three structs ~9 µs).

Any field of a nested group is also reachable from the composite (``step_data.H`` is ``step_data.mass.H``):
field names are unique across a composite (checked), and a field of an optional group that is absent reads as
``None``.

Shapes use ``N`` envs, ``B`` bodies, ``n`` joints, ``nv`` DOFs, ``nq`` coordinates, ``F`` feet, ``C = 3F``
contact rows, ``I`` Gauss-Seidel iterations, ``K`` collision bodies, ``S`` collision capsules.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

import warp as wp

from .scratch import GROUP_POOL
from .warp_setup import ELEMENTS, element_type, warp_struct


@dataclass(frozen=True)
class Sizes:
    """The sizes intermediates are shaped by, and which optional groups a step has."""

    N: int
    B: int
    n: int
    nv: int
    nq: int
    F: int
    I: int = 0  # noqa: E741 - Gauss-Seidel iterations
    K: int = 0
    S: int = 0
    contact: bool = False  # the step solves foot contact
    body_gaps: bool = False  # the step reports collision-body gaps

    @property
    def C(self) -> int:
        return 3 * self.F

    @staticmethod
    def of(model, contact=None, body_gaps: bool = False) -> "Sizes":
        """The sizes of ``model``'s steps under contact settings ``contact`` (None: no contact)."""
        with_contact = contact is not None and contact.mode != "none" and model.num_feet > 0
        return Sizes(N=model.num_envs, B=model.num_bodies, n=model.num_joints, nv=model.nv, nq=model.nq,
                     F=model.num_feet, I=contact.iterations if with_contact else 0,
                     K=model.collision.num_bodies if model.collision is not None else 0,
                     S=model.collision.num_shapes if model.collision is not None else 0, contact=with_contact,
                     body_gaps=body_gaps)


_ONES = Sizes(N=1, B=1, n=1, nv=1, nq=1, F=1, I=1, K=1, S=1)


def intermediate(shape: Callable[[Sizes], tuple], dtype: str = "scalar", *, zero: bool = False,
                 values_only: bool = False, when: Callable[[Sizes], bool] | None = None, doc: str = ""):
    """A stage intermediate: ``shape(sizes)``; ``dtype`` one of :data:`~.warp_setup.ELEMENTS` (int32 fields never
    take a gradient); ``zero``: allocated zeroed and zeroed before each reuse; ``values_only``: no gradient array;
    ``when``: the array exists only for sizes where it is true (else the field is ``None``)."""
    if dtype not in ELEMENTS:
        raise ValueError(f"unknown intermediate dtype '{dtype}'")
    meta = {"shape": shape, "dtype": dtype, "zero": zero, "grad": not values_only and dtype != "int32",
            "when": when, "doc": doc}
    return field(metadata=meta) if when is None else field(default=None, metadata=meta)


def stage_group(cls: type, when: Callable[[Sizes], bool] | None = None):
    """A nested group of intermediates (a :class:`StageData` subclass), allocated with its parent; ``when``: the
    group exists only for sizes where it is true (else the field is ``None``)."""
    return field(default=None, metadata={"group": cls, "when": when})


class StageData:
    """Base of the dataclasses of stage intermediates (see the module docstring)."""

    @classmethod
    @functools.cache
    def array_fields(cls) -> tuple[dataclasses.Field, ...]:
        """The fields declared by :func:`intermediate`."""
        return tuple(f for f in dataclasses.fields(cls) if "shape" in f.metadata)

    @classmethod
    @functools.cache
    def group_fields(cls) -> tuple[dataclasses.Field, ...]:
        """The fields declared by :func:`stage_group`."""
        return tuple(f for f in dataclasses.fields(cls) if "group" in f.metadata)

    @classmethod
    @functools.cache
    def _owners(cls) -> dict[str, str]:
        """Field name -> the nested group that declares it (for reads through the composite)."""
        owners: dict[str, str] = {}
        own = {f.name for f in cls.array_fields()} | {f.name for f in cls.group_fields()}
        for g in cls.group_fields():
            group_cls = g.metadata["group"]
            for name in [f.name for f in group_cls.array_fields()] + list(group_cls._owners()):
                if name in owners or name in own:
                    raise TypeError(f"{cls.__name__}: intermediate '{name}' is declared twice")
                owners[name] = g.name
        return owners

    @classmethod
    @functools.cache
    def struct_type(cls, dtype) -> type:
        """The Warp struct of this group's own arrays (not its nested groups') in precision ``dtype``."""
        fields = {}
        for f in cls.array_fields():
            ndim = len(f.metadata["shape"](_ONES))
            fields[f.name] = wp.array(dtype=element_type(dtype, f.metadata["dtype"]), ndim=ndim)
        suffix = "64" if dtype == wp.float64 else "32"
        return warp_struct(f"{cls.__name__}{suffix}", cls.__module__, fields)

    @classmethod
    def allocate(cls, model, sizes: Sizes, requires_grad: bool = False):
        """Fresh arrays for every declared field of this group and its nested groups."""
        arrays = {}
        for f in cls.array_fields():
            meta = f.metadata
            if meta["when"] is not None and not meta["when"](sizes):
                continue
            factory = wp.zeros if meta["zero"] else wp.empty
            arrays[f.name] = factory(meta["shape"](sizes), dtype=element_type(model.dtype, meta["dtype"]),
                                     device=model.device, requires_grad=requires_grad and meta["grad"])
        for g in cls.group_fields():
            when = g.metadata["when"]
            if when is None or when(sizes):
                arrays[g.name] = g.metadata["group"].allocate(model, sizes, requires_grad)
        data = cls(**arrays)
        data._dtype = model.dtype
        return data

    @classmethod
    def scratch(cls, model, sizes: Sizes, site: str):
        """This group in reused scratch memory (for passes whose intermediates nobody keeps, e.g. an untaped
        query): one group per call site, sizes, precision and device, its ``zero`` fields zeroed on every call."""
        key = (cls, site, sizes, model.dtype, str(model.device))
        group = GROUP_POOL.get(key)
        if group is None:
            group = GROUP_POOL[key] = cls.allocate(model, sizes)
        group.zero_accumulators()
        return group

    def __getattr__(self, name: str):
        # only called when normal lookup fails: a field of a nested group
        if name.startswith("_"):
            raise AttributeError(name)
        owner = type(self)._owners().get(name)
        if owner is None:
            raise AttributeError(f"{type(self).__name__} has no intermediate '{name}'")
        group = getattr(self, owner)
        return None if group is None else getattr(group, name)

    @property
    def values(self):
        """This group's arrays as its Warp struct (built once)."""
        values = self.__dict__.get("_values")
        if values is None:
            values = self.__dict__["_values"] = self._struct(lambda array: array)
        return values

    @property
    def grads(self):
        """This group's gradient arrays as its Warp struct (null for fields without one): built by
        :meth:`attach_gradients` when a step is reversed, or on first use for a group allocated with gradients."""
        grads = self.__dict__.get("_grads")
        if grads is None:
            for f, array in self._own_arrays():
                if f.metadata["grad"] and array.grad is None:
                    raise RuntimeError(f"{type(self).__name__}.{f.name} has no gradient array: the step was not "
                                       f"taped, or its reverse pass has not attached them yet")
            grads = self.__dict__["_grads"] = self._struct(lambda array: None if array is None else array.grad)
        return grads

    def _struct(self, pick):
        struct = type(self).struct_type(self._dtype)()
        for f in type(self).array_fields():
            setattr(struct, f.name, pick(getattr(self, f.name)))
        return struct

    def groups(self):
        """This group and every nested group that exists, parents first."""
        yield self
        for g in type(self).group_fields():
            group = getattr(self, g.name)
            if group is not None:
                yield from group.groups()

    def _own_arrays(self):
        for f in type(self).array_fields():
            array = getattr(self, f.name)
            if array is not None:
                yield f, array

    def _arrays(self):
        for group in self.groups():
            yield from group._own_arrays()

    def zero_accumulators(self) -> None:
        """Zero the fields declared ``zero`` (before a reused buffer's next step; the list is found once)."""
        zero = self.__dict__.get("_zero_arrays")
        if zero is None:
            zero = self.__dict__["_zero_arrays"] = [v for f, v in self._arrays() if f.metadata["zero"]]
        for value in zero:
            value.zero_()

    def attach_gradients(self) -> None:
        """Give every intermediate a gradient flows through, and that has none yet, a gradient array in one zeroed
        block of memory shared by all steps of this layout (:class:`GradientArena`), then build each group's
        :attr:`grads`: a taped step keeps only its values, and the reverse pass of each step, which calls this
        first, reuses the same memory (one memset instead of one per array)."""
        arena = GradientArena.of(self)
        arena.block.zero_()
        for f, value in self._arrays():
            if f.metadata["grad"] and value.grad is None:
                value.grad = arena.views[f.name]
        for group in self.groups():
            values = group.__dict__.get("_values")
            if values is not None:
                # a struct's array descriptors carry the gradient pointers they had when set: Warp's automatic
                # adjoint of a kernel that took this struct reads them, so they are set again now
                for f, array in group._own_arrays():
                    if f.metadata["grad"]:
                        setattr(values, f.name, array)
            group.__dict__["_grads"] = arena.grads_of(group)

    def nbytes(self) -> int:
        """Bytes held by the arrays and their gradient arrays."""
        return sum(v.capacity + (v.grad.capacity if v.grad is not None else 0) for _, v in self._arrays())


class GradientArena:
    """The gradient arrays of one layout of intermediates (a composite's grad-carrying fields and their shapes)
    as views into one block of scratch memory, and each group's :attr:`StageData.grads` struct built from them
    (a group whose gradient arrays are all views gets the cached struct; one with a gradient set elsewhere, e.g.
    by a mean over substeps, gets a fresh one)."""

    def __init__(self, data: StageData):
        fields = [(f.name, v) for f, v in data._arrays() if f.metadata["grad"]]
        offsets, total = [], 0
        for _, v in fields:
            offsets.append(total)
            total += -(-v.capacity // 64) * 64  # 64-byte aligned
        self.block = wp.zeros(max(total, 1), dtype=wp.uint8, device=fields[0][1].device if fields else "cpu")
        self.views = {name: wp.array(ptr=self.block.ptr + offset, shape=v.shape, dtype=v.dtype, device=v.device,
                                     capacity=v.capacity)
                      for (name, v), offset in zip(fields, offsets)}
        self._structs: dict[type, object] = {}

    @staticmethod
    def of(data: StageData) -> "GradientArena":
        """The arena of ``data``'s layout, from the scratch pool (freed by :func:`~.scratch.clear_scratch`)."""
        layout = tuple((f.name, v.shape, v.dtype, str(v.device)) for f, v in data._arrays() if f.metadata["grad"])
        key = ("gradient arena", type(data), layout)
        arena = GROUP_POOL.get(key)
        if arena is None:
            arena = GROUP_POOL[key] = GradientArena(data)
        return arena

    def grads_of(self, group: StageData):
        own = [(f, a) for f, a in group._own_arrays() if f.metadata["grad"]]
        if all(a.grad is self.views[f.name] for f, a in own):
            struct = self._structs.get(type(group))
            if struct is None:
                struct = self._structs[type(group)] = group._struct(lambda a: None if a is None else a.grad)
            return struct
        return group._struct(lambda a: None if a is None else a.grad)


def stage_input(element: str | None = None, ndim: int = 0, *, group: type | None = None, doc: str = ""):
    """A field of a stage's inputs (:class:`StageInputs`): an array (``element`` one of
    :data:`~.warp_setup.ELEMENTS`, ``ndim`` >= 1), a scalar (``element`` "scalar" or "int32", ``ndim`` 0), or the
    intermediates of another stage (``group``, a :class:`StageData` subclass: its struct)."""
    if group is None and element not in ELEMENTS:
        raise ValueError(f"stage input: unknown element type '{element}'")
    return field(metadata={"input": True, "element": element, "ndim": ndim, "group": group, "doc": doc})


_INPUT_STRUCTS: dict[type, "OrderedDict[tuple, tuple]"] = {}


class StageInputs:
    """Base of the dataclass of what one stage reads (besides the model): state arrays, other stages'
    intermediates (whole groups) and scalars, declared with :func:`stage_input`.

    A stage's kernels take three struct arguments, ``(model, inputs, outputs)``; its reverse kernel takes the
    same three and then ``inputs_grad`` (:meth:`grads`, the same struct type) and the outputs' gradients
    (:attr:`StageData.grads`). So every signature is written once, and one list builds both launches.
    """

    @classmethod
    @functools.cache
    def struct_type(cls, dtype) -> type:
        """The Warp struct of these inputs in precision ``dtype``."""
        fields = {}
        for f in dataclasses.fields(cls):
            meta = f.metadata
            if meta["group"] is not None:
                fields[f.name] = meta["group"].struct_type(dtype)
            elif meta["ndim"] == 0:
                fields[f.name] = element_type(dtype, meta["element"])
            else:
                fields[f.name] = wp.array(dtype=element_type(dtype, meta["element"]), ndim=meta["ndim"])
        suffix = "64" if dtype == wp.float64 else "32"
        return warp_struct(f"{cls.__name__}{suffix}", cls.__module__, fields)

    def _build(self, dtype, pick_array, pick_group, pick_scalar):
        struct = type(self).struct_type(dtype)()
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata["group"] is not None:
                setattr(struct, f.name, pick_group(value))
            elif f.metadata["ndim"] == 0:
                setattr(struct, f.name, pick_scalar(f, value))
            else:
                setattr(struct, f.name, pick_array(f, value))
        return struct

    def values(self, dtype, reuse: bool = False):
        """The inputs as their Warp struct (scalars converted to precision ``dtype``). With ``reuse`` (untaped
        stages, whose groups are reused buffers), the struct of the same members (the same arrays and groups, the
        same scalars) is built once and kept: a step on reused buffers then copies no groups into structs again (a
        struct is passed to kernels by value, and a kept one is never changed). Taped stages do not keep theirs:
        a kept struct holds its arrays alive."""
        values = self.__dict__.get("_values")
        if values is None and not reuse:
            values = self.__dict__["_values"] = self._build(
                dtype, lambda f, a: a, lambda g: g.values, lambda f, x: element_type(dtype, f.metadata["element"])(x))
        if values is None:
            members = tuple(getattr(self, f.name) for f in dataclasses.fields(self))
            key = (dtype, *(m if isinstance(m, (int, float)) else id(m) for m in members))
            cache = _INPUT_STRUCTS.setdefault(type(self), OrderedDict())
            entry = cache.get(key)
            if entry is None:
                struct = self._build(dtype, lambda f, a: a, lambda g: g.values,
                                     lambda f, x: element_type(dtype, f.metadata["element"])(x))
                entry = cache[key] = (members, struct)  # the members are kept: their ids stay theirs
                if len(cache) > 8:
                    cache.popitem(last=False)
            else:
                cache.move_to_end(key)
            values = self.__dict__["_values"] = entry[1]
        return values

    def grads(self, dtype, stage: str):
        """The inputs' gradient arrays as the same struct, for ``stage``'s reverse kernel to accumulate into: each
        array's gradient (or a scratch stand-in where it has none, :func:`~.adjoint.input_grad`), each group's
        :attr:`StageData.grads`; scalars take no gradient (zero)."""
        from .adjoint import input_grad

        return self._build(dtype, lambda f, a: input_grad(f"{stage}.{f.name}", a), lambda g: g.grads,
                           lambda f, x: element_type(dtype, f.metadata["element"])(0))


@functools.cache
def kernel_types(dtype) -> SimpleNamespace:
    """The Warp struct types of the model and of every stage's intermediates in precision ``dtype``, by short
    name: what kernel signatures are annotated with (``model: T.Model``, ``outputs: T.Kin``, ...)."""
    from .actuators import ActuationData
    from .bias_forces import BiasForceData
    from .body_contacts import BodyGapData
    from .cholesky import SolveData
    from .contact import ContactGeometryData
    from .contact_velocity import ContactVelocityData
    from .delassus import DelassusData
    from .divergence import DivergenceData
    from .foot_kinematics import FootData
    from .gauss_seidel import GaussSeidelData, solver_settings_type
    from .impulse_response import ImpulseResponseData
    from .integrator import IntegratorData
    from .kinematics import KinematicsData
    from .mass_matrix import MassMatrixData
    from .model import model_struct_type, parameter_grads_type

    groups = dict(Kin=KinematicsData, Mass=MassMatrixData, Bias=BiasForceData, Act=ActuationData, Solve=SolveData,
                  Integration=IntegratorData, Geometry=ContactGeometryData, Velocity=ContactVelocityData,
                  Delassus=DelassusData, Solution=GaussSeidelData, Response=ImpulseResponseData, Guard=DivergenceData,
                  Feet=FootData, Bodies=BodyGapData)
    return SimpleNamespace(Model=model_struct_type(dtype), Params=parameter_grads_type(dtype),
                           Settings=solver_settings_type(dtype),
                           **{name: group.struct_type(dtype) for name, group in groups.items()})
