"""Declarations given on the command line as Python (``--declarations``): the pipeline a Python
file or module builds, so that a pipeline declared with :mod:`lakehouse.declare` runs from the
command line without being exported to TOML.

``--declarations`` takes:

* ``my_pipeline.py`` or ``my_pipeline.py:name``: a Python file, run as a module (not as
  ``__main__``: code under ``if __name__ == "__main__":`` does not run);
* ``package.module:name`` (or ``package.module``): a module importable from the working
  directory or ``PYTHONPATH``;
* ``pipeline.toml``: a pipeline TOML file, as ``--config`` takes.

The object is a :class:`~lakehouse_core.config.PipelineConfig` (``pipeline_config(...)``), a
:class:`lakehouse.Lakehouse` or a running pipeline's :class:`lakehouse.Pipeline` handle (their
``config``), or a function without arguments that returns one of those. Without ``:name`` the
module must hold exactly one such object (functions are not called then, imported ones are not
counted, and a ``Lakehouse`` or ``Pipeline`` is the one over plain configs beside it). Building a
``Lakehouse`` starts no Spark; a module that runs its pipeline when imported would run it.
"""

from __future__ import annotations

import importlib
import runpy
import sys
from pathlib import Path
from typing import Any

from lakehouse_core.config import PipelineConfig, load_config
from lakehouse_core.errors import ConfigError, LakehouseError

#: What an object given to ``--declarations`` may be, as error lines name it.
ACCEPTED = "a PipelineConfig (pipeline_config(...)), a Lakehouse or a Pipeline handle"


def load_declarations(spec: str) -> PipelineConfig:
    """The pipeline ``spec`` (``--declarations``'s value, see the module's docstring) declares.

    Raises:
        ConfigError: one line: the file or module is missing, importing it failed, it has no
            such attribute (or not exactly one pipeline, without ``:name``), or the object is
            not a pipeline.
    """
    option = f"--declarations {spec}"
    where, name = _split(spec)
    if where.endswith(".toml"):
        if name is not None:
            raise ConfigError(f"{option}: a TOML file declares one pipeline; drop ':{name}'.")
        return load_config(where)
    if where.endswith(".py") or "/" in where or "\\" in where or Path(where).is_file():
        namespace = _run_file(where, option)
        place = f"the file {where}"
    else:
        namespace = _import_module(where, option)
        place = f"the module {where}"
    if name is None:
        return _the_one(namespace, option, place)
    found = _attribute(namespace, name, option, place)
    if callable(found) and not isinstance(found, type) and _config_of(found) is None:
        try:
            found = found()
        except LakehouseError:
            raise
        except Exception as error:
            raise ConfigError(f"{option}: calling {name}() raised {_error_line(error)}") from None
    config = _config_of(found)
    if config is None:
        raise ConfigError(
            f"{option}: {name} is {_a(found)}, not a pipeline: give {ACCEPTED}, or a function "
            "that returns one."
        )
    return config


def _split(spec: str) -> tuple[str, str | None]:
    """``spec`` as (file or module, attribute or None): ``a/b.py:x`` -> (``a/b.py``, ``x``)."""
    where, sep, name = spec.rpartition(":")
    if not sep or not name or "/" in name or "\\" in name or not where:
        return spec, None  # no attribute (or a Windows drive: C:\\...)
    return where, name


def _run_file(path: str, option: str) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(
            f"{option}: no such file {path}: give a Python file that declares the pipeline "
            "(file.py or file.py:name), a module:name, or a pipeline TOML file."
        )
    folder = str(file.resolve().parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)  # its own helper modules import as when it runs
    try:
        return runpy.run_path(str(file), run_name=f"lakehouse_declarations_{file.stem}")
    except LakehouseError:
        raise
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        raise ConfigError(f"{option}: running {path} raised {_error_line(error)}") from None
    finally:
        if added:
            sys.path.remove(folder)


def _import_module(name: str, option: str) -> dict[str, Any]:
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # the working directory, as ``python -m`` has it
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is not None and name.startswith(error.name):
            raise ConfigError(
                f"{option}: no module named {error.name!r} (from the working directory or "
                "PYTHONPATH): give module:name of an importable module, or a Python file "
                "(file.py:name)."
            ) from None
        raise ConfigError(f"{option}: importing {name} raised {_error_line(error)}") from None
    except LakehouseError:
        raise
    except Exception as error:
        raise ConfigError(f"{option}: importing {name} raised {_error_line(error)}") from None
    return vars(module)


def _attribute(namespace: dict[str, Any], name: str, option: str, place: str) -> Any:
    """``name`` (dotted: ``a.b``) in ``namespace``."""
    first, *rest = name.split(".")
    if first not in namespace:
        held = _pipelines(namespace)
        hint = f" (its pipelines: {', '.join(held)})" if held else ""
        raise ConfigError(f"{option}: {place} defines no {first!r}{hint}.")
    found = namespace[first]
    for part in rest:
        if not hasattr(found, part):
            raise ConfigError(f"{option}: {first} has no attribute {part!r}.")
        found = getattr(found, part)
    return found


def _the_one(namespace: dict[str, Any], option: str, place: str) -> PipelineConfig:
    held = _pipelines(namespace)
    if len(held) == 1:
        config = _config_of(namespace[held[0]])
        assert config is not None
        return config
    if not held:
        raise ConfigError(
            f"{option}: {place} defines no pipeline ({ACCEPTED}): declare one, or name the "
            "function that builds it (:name)."
        )
    raise ConfigError(
        f"{option}: {place} defines {len(held)} pipelines ({', '.join(held)}): name the one "
        f"to run, e.g. {option}:{held[0]}."
    )


def _pipelines(namespace: dict[str, Any]) -> list[str]:
    """The names of ``namespace`` bound to a pipeline, one per pipeline (a ``Lakehouse`` and
    its ``config`` under two names count once, by the first name; one imported from another
    module is not counted). A ``Lakehouse`` or ``Pipeline`` is the module's pipeline over any
    plain config beside it (one it builds from)."""
    handles = [name for name, value in namespace.items() if _is_handle(value)]
    names: list[str] = []
    seen: list[PipelineConfig] = []
    for name, value in namespace.items():
        if name.startswith("_") or (handles and name not in handles) or _imported(name, value):
            continue
        config = _config_of(value)
        if config is not None and not any(config is other for other in seen):
            names.append(name)
            seen.append(config)
    return names


def _imported(name: str, value: Any) -> bool:
    """Whether ``value`` is bound to ``name`` in a module imported before (``from m import
    name``): another module's pipeline, not the one this module declares."""
    return any(
        getattr(module, name, None) is value
        for module in list(sys.modules.values())
        if module is not None
    )


def _is_handle(value: Any) -> bool:
    return not isinstance(value, PipelineConfig | type) and _config_of(value) is not None


def _config_of(value: Any) -> PipelineConfig | None:
    """``value`` if a PipelineConfig, else the ``config`` of a Lakehouse or Pipeline handle."""
    if isinstance(value, PipelineConfig):
        return value
    if isinstance(value, type):
        return None
    api, handle = sys.modules.get("lakehouse.api"), sys.modules.get("lakehouse.handle")
    kinds = tuple(
        kind
        for kind in (getattr(api, "Lakehouse", None), getattr(handle, "Pipeline", None))
        if kind
    )
    if kinds and isinstance(value, kinds):  # only built once the module made one: no import
        config = value.config
        return config if isinstance(config, PipelineConfig) else None
    return None


def _a(value: Any) -> str:
    kind = type(value).__name__
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"


def _error_line(error: BaseException) -> str:
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
