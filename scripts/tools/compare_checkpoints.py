"""Compare two training checkpoints entry by entry, bit for bit: did a change of the code change the training?

Walks both files' nested dicts (weights, optimiser states, env states, random states, ...) and compares every entry
they share exactly (``torch.equal`` for tensors, ``==`` for the rest); entries that only one file has (the state of an
option that was removed or added) are listed apart. Exit status 0 when every shared entry is identical, 1 otherwise.

    .venv/bin/python scripts/tools/compare_checkpoints.py logs/shac/anymal_d_flat/<before>/model_50.pt \\
        logs/shac/anymal_d_flat/<after>/model_50.pt
"""

from __future__ import annotations

import argparse
import sys

import torch


def compare(a, b, path: str = "", out: dict | None = None) -> dict:
    """``{"equal": n, "different": [paths], "only_first": [paths], "only_second": [paths]}`` of two nested values
    (dicts and dict-like state such as TensorDicts, lists, tensors, plain values)."""
    out = out if out is not None else {"equal": 0, "different": [], "only_first": [], "only_second": []}

    def child(key) -> str:
        return f"{path}.{key}" if path else str(key)

    if hasattr(a, "keys") and hasattr(b, "keys"):
        for key in a.keys():
            if key in b.keys():
                compare(a[key], b[key], child(key), out)
            else:
                out["only_first"].append(child(key))
        out["only_second"] += [child(key) for key in b.keys() if key not in a.keys()]
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}[{i}]", out)
        return out
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        same = a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    else:
        try:
            same = bool(a == b)
        except Exception:  # noqa: BLE001 - values without a plain equality
            same = repr(a) == repr(b)
    if same:
        out["equal"] += 1
    else:
        out["different"].append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("first", help="a checkpoint (model_<it>.pt)")
    parser.add_argument("second", help="the checkpoint to compare it with")
    args = parser.parse_args(argv)
    loaded = []
    for path in (args.first, args.second):
        try:
            loaded.append(torch.load(path, weights_only=False, map_location="cpu"))
        except Exception as err:  # noqa: BLE001 - a missing, corrupt or foreign file
            parser.error(f"cannot read '{path}' as a torch checkpoint ({type(err).__name__})")
    result = compare(*loaded)
    print(f"identical entries: {result['equal']}; different: {len(result['different'])}; only in the first: "
          f"{len(result['only_first'])}; only in the second: {len(result['only_second'])}")
    for name in ("different", "only_first", "only_second"):
        for path in result[name]:
            print(f"  {name}: {path}")
    return 0 if not result["different"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
