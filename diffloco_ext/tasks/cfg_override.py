"""Command-line overrides of config dataclasses in Isaac Lab 3.0's form (``env.x.y=value``, ``agent.x.y=value``),
and configs as plain dicts for ``params/env.yaml`` / ``params/agent.yaml``.

A value is parsed as YAML (``1e-3``, ``true``, ``[0.5, 1.5]``, ``null``, strings) and must fit the field: the type
of its current value (an int is accepted for a float field; a list for a tuple of the same length) or, for a
field that is ``None`` now, its annotation. Unknown keys, values of the wrong type and values a config rejects
(its own validation, e.g. a negative ``dt``) are :class:`ConfigOverrideError`\\ s naming the key.
"""

from __future__ import annotations

import dataclasses
import typing

import yaml


class ConfigOverrideError(ValueError):
    """An override that names no field, or gives a value the field cannot take."""


def parse_overrides(items: list[str]) -> dict[str, dict[str, str]]:
    """``["env.a.b=1", "agent.c=2"]`` -> ``{"env": {"a.b": "1"}, "agent": {"c": "2"}}``."""
    out: dict[str, dict[str, str]] = {"env": {}, "agent": {}}
    for item in items:
        key, sep, value = item.partition("=")
        root, dot, path = key.partition(".")
        if not sep or not dot or root not in out or not path:
            raise ConfigOverrideError(f"override '{item}' is not of the form env.<field>=<value> or "
                                      f"agent.<field>=<value>")
        out[root][path] = value
    return out


def apply_overrides(cfg, overrides: dict[str, str], root: str = "cfg"):
    """Set each dotted ``path`` of ``cfg`` (a dataclass, nested) to its parsed value, in place; returns ``cfg``."""
    for path, text in overrides.items():
        *parents, name = path.split(".")
        owner, holder = cfg, None
        for i, part in enumerate(parents):
            holder, owner = owner, _child(owner, part, f"{root}.{'.'.join(parents[:i + 1])}")
        full = f"{root}.{path}"
        if isinstance(owner, dict) and dataclasses.is_dataclass(holder):
            # one entry of a mapping field (``env.rewards.weights_after_curriculum.action_rate=-0.05``): typed by
            # the field's annotation (``dict[str, float]``: the value as a float), added if it is not there yet
            args = typing.get_args(_annotation(holder, parents[-1]) or dict)
            owner[name] = _convert(full, owner.get(name), args[1] if len(args) == 2 else None, _parse(text))
            continue
        if not dataclasses.is_dataclass(owner) or name not in {f.name for f in dataclasses.fields(owner)}:
            fields = [f.name for f in dataclasses.fields(owner)] if dataclasses.is_dataclass(owner) else []
            raise ConfigOverrideError(f"unknown config key '{full}': {type(owner).__name__} has {fields}")
        value = _convert(full, getattr(owner, name), _annotation(owner, name), _parse(text))
        try:
            setattr(owner, name, value)
        except (ValueError, TypeError, AttributeError) as err:
            raise ConfigOverrideError(f"'{full}={text}': {err}") from err
    return cfg


def _parse(text: str):
    return yaml.safe_load(text)


def _number(value):
    """``value``, or the float of a string YAML 1.1 does not read as a number (``1e-3``, ``-2E5``)."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _child(owner, part: str, where: str):
    if dataclasses.is_dataclass(owner) and part in {f.name for f in dataclasses.fields(owner)}:
        return getattr(owner, part)
    if isinstance(owner, dict) and part in owner:
        return owner[part]
    raise ConfigOverrideError(f"unknown config key '{where}'")


def _annotation(owner, name: str):
    try:
        return typing.get_type_hints(type(owner)).get(name)
    except Exception:  # noqa: BLE001 - unresolvable annotation: fall back to the current value's type
        return None


def _convert(key: str, current, annotation, value):
    def fail(expected: str):
        raise ConfigOverrideError(f"'{key}': expected {expected}, got {value!r} ({type(value).__name__})")

    if dataclasses.is_dataclass(current):
        if isinstance(value, str):
            return value  # e.g. a contact mode name for a ContactParams field: the config converts it
        fail(f"fields of {type(current).__name__} (set them one by one: {key}.<field>=...)")
    if current is None:
        if value is None:
            return None
        args = [a for a in typing.get_args(annotation) if a is not type(None)] if annotation else []
        if isinstance(annotation, type):  # an item of a typed tuple, e.g. float
            args = [annotation]
        if args:
            for candidate in args:
                origin, item_types = typing.get_origin(candidate), typing.get_args(candidate)
                if origin in (tuple, list) and isinstance(value, (list, tuple)):  # e.g. tuple[float, float] | None
                    fixed = origin is tuple and bool(item_types) and Ellipsis not in item_types
                    if fixed and len(value) != len(item_types):
                        fail(f"a list of {len(item_types)}")
                    types = item_types if fixed else [item_types[0] if item_types else None] * len(value)
                    return origin(_convert(f"{key}[{i}]", None, t, v) for i, (t, v) in enumerate(zip(types, value)))
                value = _number(value) if candidate is float else value
                if candidate is float and isinstance(value, (int, float)) and not isinstance(value, bool):
                    return float(value)
                if isinstance(candidate, type) and isinstance(value, candidate):
                    return value
            fail(" or ".join(getattr(a, "__name__", str(a)) for a in args))
        return value
    if value is None:
        args = typing.get_args(annotation) if annotation else ()
        if type(None) in args:
            return None
        fail(type(current).__name__)
    if isinstance(current, bool):
        if not isinstance(value, bool):
            fail("true or false")
        return value
    if isinstance(current, int):
        if isinstance(value, bool) or not isinstance(value, int):
            fail("an integer")
        return value
    if isinstance(current, float):
        value = _number(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail("a number")
        return float(value)
    if isinstance(current, str):
        if not isinstance(value, str):
            fail("a string")
        return value
    if isinstance(current, (tuple, list)):
        item_types = typing.get_args(annotation) if annotation else ()
        if typing.get_origin(annotation) is tuple and len(item_types) == 2 and item_types[1] is Ellipsis:
            # a tuple of any length, e.g. tuple[str, ...]: every item of the one type
            if not isinstance(value, (list, tuple)):
                fail(f"a list of {getattr(item_types[0], '__name__', item_types[0])}")
            return tuple(_convert(f"{key}[{i}]", None, item_types[0], v) for i, v in enumerate(value))
        if not isinstance(value, (list, tuple)):
            fail(f"a list of {len(current)}")
        if isinstance(current, tuple) and len(value) != len(current):
            fail(f"a list of {len(current)}")
        items = [_convert(f"{key}[{i}]", c, None, v) for i, (c, v) in enumerate(zip(current, value))] \
            if isinstance(current, tuple) else list(value)
        return type(current)(items)
    if isinstance(current, dict):
        if not isinstance(value, dict):
            fail("a mapping")
        key_type, item_type = (typing.get_args(annotation) or (None, None)) if annotation else (None, None)
        if key_type is not None and any(not isinstance(k, key_type) for k in value):
            fail(f"a mapping with {key_type.__name__} keys")
        if item_type is not None:  # e.g. dict[str, float]: every value converted as a field of that type
            return {k: _convert(f"{key}.{k}", None, item_type, v) for k, v in value.items()}
        return value
    return value


def to_dict(cfg) -> dict:
    """A config as plain, YAML-friendly data (dataclasses -> dicts, tuples -> lists)."""
    def plain(x):
        if dataclasses.is_dataclass(x):
            return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if isinstance(x, dict):
            return {str(k): plain(v) for k, v in x.items()}
        return x

    return plain(cfg)


def dump_yaml(cfg, path: str) -> None:
    """Write ``cfg`` as YAML (``params/env.yaml``, ``params/agent.yaml``)."""
    with open(path, "w") as f:
        yaml.safe_dump(to_dict(cfg), f, sort_keys=False)
