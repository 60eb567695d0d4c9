"""diffloco: learning deployable legged-locomotion controllers with differentiable simulation.

Layers, each depending only on the ones before it::

    assets -> sim -> tasks -> learning -> validation

plus ``diffloco_ext.isaaclab``, the only place that imports ``isaaclab``.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("diffloco_ext")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
