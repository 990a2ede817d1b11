"""Rootdir and config file found from the project, not from an option's value.

Why: pytest picks its rootdir and ini file before it loads plugins, so it does not yet know
specperf's options; in ``pytest -m perf --baselines-dir /data/bl`` (a space, not ``=``) it takes
``/data/bl`` for a test path. The rootdir becomes a common ancestor such as ``/``, the project's
pyproject.toml is not read (its markers are unknown: ``PytestUnknownMarkWarning``; its
``pythonpath`` and ``testpaths`` are lost) and ``.pytest_cache`` lands outside the repository.
``--suite PATH`` and ``--results-dir PATH`` do the same.

Once specperf's options are registered (``pytest_load_initial_conftests``, before conftests are
read), :func:`use_project_rootdir` takes the test paths of pytest's second parse (every option
known) and, when they give another rootdir or ini file, sets pytest's to those. It uses pytest's
own ``determine_setup``; the attributes it sets are pytest internals, pinned by
tests/unit/plugin/test_rootdir.py (a pytest that renames them makes that test fail, and this
becomes a no-op instead of an error).
"""

from __future__ import annotations

import copy
import inspect
from pathlib import Path
from typing import Any

import pytest


def _setup(config: pytest.Config, ns: Any) -> tuple[Path, Path | None, Any] | None:
    try:
        from _pytest.config.findpaths import determine_setup
    except ImportError:  # pragma: no cover - a pytest without it: leave pytest's choice
        return None
    given = {
        "inifile": ns.inifilename,
        "override_ini": getattr(ns, "override_ini", None),
        "args": ns.file_or_dir,
        "rootdir_cmd_arg": ns.rootdir or None,
        "invocation_dir": config.invocation_params.dir,
    }
    accepted = inspect.signature(determine_setup).parameters
    result = determine_setup(**{k: v for k, v in given.items() if k in accepted})
    return result[0], result[1], result[2]


def use_project_rootdir(config: pytest.Config, args: list[str]) -> bool:
    """Re-determine rootdir/ini file with every option known; True when pytest's were wrong
    and have been replaced (``args`` gains the right ini file's ``addopts``)."""
    parser = getattr(config, "_parser", None)
    needed = ("_rootpath", "_inipath", "_inicfg", "_inicache", "known_args_namespace")
    if parser is None or not all(hasattr(config, a) for a in needed):
        return False
    # pytest parsed again after loading plugins: the test paths here hold no option values
    ns = config.known_args_namespace
    found = _setup(config, ns)
    if found is None:
        return False
    rootpath, inipath, inicfg = found
    if rootpath == config.rootpath and inipath == config.inipath:
        return False
    old_root = str(config.rootpath)
    config._rootpath = rootpath
    config._inipath = inipath
    config._inicfg = inicfg
    config._inicache.clear()
    parser.extra_info["rootdir"] = str(rootpath)
    parser.extra_info["inifile"] = str(inipath)
    addopts = list(config.getini("addopts") or [])
    if addopts:
        args[:0] = addopts
        config.known_args_namespace = parser.parse_known_args(
            args, namespace=copy.copy(config.option)
        )
    if hasattr(config, "_configure_python_path"):
        config._configure_python_path()  # the project's pythonpath (e.g. ".")
    kn = config.known_args_namespace
    if kn.confcutdir in (None, old_root):  # pytest's default, from the wrong rootdir
        kn.confcutdir = str(inipath.parent if inipath is not None else rootpath)
    return True


__all__ = ["use_project_rootdir"]
