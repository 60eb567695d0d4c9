"""Scratch arrays of the hand-written reverse passes, allocated once and reused.

A reverse pass needs temporaries (adjoints of a stage's internals, solves with the factor) only while its
kernel runs; allocating them anew for every step of every backward pass costs allocations, page faults and
zero fills (about 2 ms per step of 4096 environments). :func:`scratch_array` keeps one array per call site,
shape, dtype and device, for the life of the process (:func:`clear_scratch` frees them). Reuse is safe because
the reverse passes run one after the other: on the CPU each launch finishes before the next starts, and on a
GPU the launches of one stream run in order.
"""

import warp as wp

_POOL: dict[tuple, wp.array] = {}
#: Incremented by :func:`clear_scratch` (recorded step replays that may point into the pool are keyed on it).
GENERATION = [0]
#: Stage-data groups in scratch memory (:meth:`~.stage_data.StageData.scratch`), by call site, sizes and device.
GROUP_POOL: dict[tuple, object] = {}


def scratch_array(site: str, shape: tuple[int, ...], dtype, device, zero: bool = True) -> wp.array:
    """The scratch array of ``site`` (a name unique to its user) with this shape, dtype and device; zero-filled
    when ``zero`` (otherwise its content is left over from the last use)."""
    key = (site, tuple(shape), dtype, str(device))
    array = _POOL.get(key)
    if array is None:
        array = wp.empty(shape, dtype=dtype, device=device)
        _POOL[key] = array
    if zero:
        array.zero_()
    return array


def clear_scratch() -> None:
    """Free every scratch array and group."""
    _POOL.clear()
    GROUP_POOL.clear()
    GENERATION[0] += 1
