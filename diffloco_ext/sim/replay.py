"""Replays of the untaped step as Warp graphs: its launches recorded once and replayed without Python.

An untaped step on the CPU costs ~15 kernel launches of Python (packing arguments, building the stages' input
structs): ~0.6 ms per step at 256 environments, a third of the step. A Warp CPU graph (``wp.capture_begin`` /
``wp.capture_launch``, Warp's API capture) records the launches and the zeroing of the reused buffers once and
replays them from C++.

A recorded step bakes in everything its launches were given: the arrays (by address) and the scalars. So a graph
is keyed on the identity of every array the step reads or writes (the model's struct, the states, the controls,
the reused buffers) and on every setting (time step, contact settings, guards, body-gap reporting), and it holds
references to those arrays so their memory outlives it. Contents may change freely between replays (a
randomised mass, a new joint target written into the same control array): the graph reads the memory. A key is
recorded the second time it is seen (a caller that makes new arrays every step, such as the torch bridge, never
pays for a recording it cannot reuse), and only on the CPU (elsewhere the steps run as they are). The scratch pool's
generation is part of the key (:func:`~.scratch.clear_scratch` frees memory a graph may point to).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

import warp as wp


class StepReplays:
    """Graphs of recorded steps by key, the ``capacity`` most recent ones (and as many keys seen once)."""

    def __init__(self, capacity: int = 8):
        self.capacity = capacity
        self._graphs: OrderedDict[tuple, tuple] = OrderedDict()
        self._seen: OrderedDict[tuple, tuple] = OrderedDict()

    def run(self, key: tuple, keep: tuple, device: str, step: Callable[[], None]) -> None:
        """Run ``step`` (launches only) under ``key``: replay its graph if one is recorded, record it now if the key
        was seen before, else run it as it is. ``keep``: the objects the key's identities refer to."""
        entry = self._graphs.get(key)
        if entry is not None:
            self._graphs.move_to_end(key)
            wp.capture_launch(entry[0])
            return
        if not str(device).startswith("cpu") or key not in self._seen:
            self._remember(self._seen, key, keep)
            step()
            return
        wp.capture_begin(device=device)
        try:
            step()
        except Exception:
            wp.capture_end(device=device)
            self._seen.pop(key, None)
            step()  # a genuine error raises again here, outside the capture
            return
        graph = wp.capture_end(device=device)
        self._seen.pop(key, None)
        self._remember(self._graphs, key, (graph, keep))
        wp.capture_launch(graph)  # the capture recorded the step without running it

    def _remember(self, cache: OrderedDict, key: tuple, value) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self.capacity:
            cache.popitem(last=False)

    def clear(self) -> None:
        self._graphs.clear()
        self._seen.clear()
