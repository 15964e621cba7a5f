"""Load the filter file the way Open WebUI does: exec its source into a fresh module."""

import itertools
import sys
import types
from pathlib import Path

FILTER_PATH = Path(__file__).resolve().parents[1] / "filter" / "memory_filter.py"

_module_numbers = itertools.count()


def load_filter(path: Path | str = FILTER_PATH) -> types.ModuleType:
    """Exec the filter source into a new module registered under a unique name.

    Open WebUI (`utils/plugin.py`, `load_function_module_by_id`) registers a fresh module in
    `sys.modules` and `exec`s the stored source into it; every call here gives a new module,
    so no test sees another test's module state.
    """
    source = Path(path).read_text(encoding="utf-8")
    name = f"function_memory_filter_{next(_module_numbers)}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module
