"""ServerEngine: an engine that is one HTTP server process this process owns.

vLLM, SGLang, the transformers server and the calibration server differ only in how they are
launched (argv, environment, container clean-up), how the client connects once the server is
healthy, and what the engine record holds. The lifecycle around that — free port, log file, one
``ServerProcess``, readiness, stop on a failed connect, the record kept from the last time the
server was alive — is written once, here.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from specperf.engines.base import Devices, Engine, EngineClient, EngineRecord, EngineSpec
from specperf.engines.process import (
    DEFAULT_GRACE_S,
    ServerProcess,
    device_key,
    free_port,
    redact_command,
)
from specperf.environment.record import engine_env_record
from specperf.errors import ConfigError, EngineStartError
from specperf.placement import Placement
from specperf.placement import apply as apply_placement


@dataclass(frozen=True)
class LaunchPlan:
    """How to start the server: argv, its environment, and commands that clean up after it
    (``docker rm -f`` for a container) — built before anything starts, so it can be tested."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cleanup: Sequence[Sequence[str]] = ()
    cwd: Path | None = None
    grace_s: float = DEFAULT_GRACE_S


@dataclass
class RecordFacts:
    """What an engine knows about itself for the run summary's engine record."""

    version: str | None = None
    server_config: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class ServerEngine(Engine):
    """Start/stop/record for an engine served over HTTP by one process (group).

    Subclasses set ``kind`` and implement ``launch_plan`` (nothing started yet), ``connect``
    (server healthy: return the client, raise EngineStartError to refuse it) and
    ``record_facts`` (the engine's version and resolved config; default: the client's)."""

    kind: ClassVar[str]
    health_path: ClassVar[str] = "/health"

    def __init__(self, spec: EngineSpec, devices: Devices, log_dir: Path) -> None:
        super().__init__(spec, devices, log_dir)
        if spec.kind != self.kind:
            raise ConfigError(f"{type(self).__name__} given an engine of kind {spec.kind!r}")
        self.port: int | None = None
        self.server: ServerProcess | None = None
        self.command: list[str] = []
        self._client: EngineClient | None = None
        self._record: EngineRecord | None = None
        self.placement: dict[str, Any] | None = None  # what apply_placement did, if anything

    # ------------------------------------------------------------ what subclasses say
    @abstractmethod
    def launch_plan(self, port: int) -> LaunchPlan:
        """argv/env/clean-up for a server on ``port``; raises ConfigError for a bad spec."""

    @abstractmethod
    def connect(self) -> EngineClient:
        """The client for the healthy server (may fetch slow one-off facts now, not later)."""

    def record_facts(self, live: bool) -> RecordFacts:
        """Version and server config; ``live``: the server is up and the client connected
        (otherwise say what is known without it, e.g. from the log)."""
        if not live or self._client is None:
            return RecordFacts()
        return RecordFacts(
            version=self._client.version(), server_config=self._client.server_config()
        )

    def cpu_placement(self) -> Placement | None:
        """How to split the server's processes over the CPU set (specperf.placement); None:
        leave them where they start (GPU engines, one core, single-process servers)."""
        return None

    def model_name(self) -> str:
        return self.spec.served_model_name or self.spec.model

    # ------------------------------------------------------------ the lifecycle
    @property
    def host(self) -> str:
        return str(self.spec.option("host", "127.0.0.1"))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float) -> None:
        if self.server is not None:
            raise EngineStartError(f"{self.spec.label}: already started")
        port = free_port(self.host)
        plan = self.launch_plan(port)
        self.port = port
        self.command = list(plan.argv)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.server = ServerProcess(
            plan.argv,
            log_path=self.log_dir / f"{self.kind}-{self.spec.digest()}-{stamp}-{port}.log",
            name=f"{self.kind} engine {self.spec.label!r} ({self.spec.method})",
            env=plan.env,
            cpus=self.devices.cpus,
            device=device_key(self.devices),
            digest=self.spec.digest(),
            cwd=plan.cwd,
            cleanup_commands=plan.cleanup,
            grace_s=plan.grace_s,
        )
        self.server.start(f"{self.base_url}{self.health_path}", timeout_s)
        try:
            split = self.cpu_placement()
            if split is not None and self.server.pid:
                self.placement = apply_placement(self.server.pid, split)
            self._client = self.connect()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.server is not None:
            if self._record is None and self.server.is_alive():
                self._record = self._make_record()  # keep what only a live server knows
            self.server.stop()

    def client(self) -> EngineClient:
        if self._client is None:
            raise EngineStartError(f"{self.spec.label}: not started")
        return self._client

    def is_alive(self) -> bool:
        return self.server is not None and self.server.is_alive()

    def record(self) -> EngineRecord:
        if self.is_alive() or self._record is None:
            self._record = self._make_record()
        return self._record

    def _make_record(self) -> EngineRecord:
        server = self.server
        facts = self.record_facts(self._client is not None and self.is_alive())
        env = None if self.spec.image else engine_env_record(self.spec.python)
        if env and env.get("torch_build") not in (None, "pinned"):
            facts.notes.append(
                f"engine env {env.get('name')}: torch {(env.get('versions') or {}).get('torch')}"
                f" is the {env['torch_build']} build, not the pinned {env.get('torch_pin')}"
            )
        return EngineRecord(
            kind=self.kind,
            label=self.spec.label,
            version=facts.version,
            startup_s=server.startup_s if server else None,
            command=redact_command(self.command),
            server_config=facts.server_config,
            pid=server.pid if server else None,
            log_path=str(server.log_path) if server else None,
            notes=[*facts.notes, *self._placement_notes()],
            env=env,
        )

    def _placement_notes(self) -> list[str]:
        if not self.placement:
            return []
        p = self.placement["plan"]
        return [
            f"cpu placement: API server on {p['frontend']}, engine processes on {p['engine']}, "
            f"OpenMP threads on {p['compute']}"
        ]
