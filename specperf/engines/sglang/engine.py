"""An SGLang server this process owns: the fail-fast checks, the launch plan (its env's server
or an image under ``docker run``), and the check that SGLang kept the topology asked for."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from packaging.version import Version

from specperf.engines import container
from specperf.engines.base import Devices, EngineSpec
from specperf.engines.server_engine import LaunchPlan, RecordFacts, ServerEngine
from specperf.engines.sglang.client import SglangClient
from specperf.engines.sglang.command import build_command, server_args, server_env, topology
from specperf.engines.sglang.counters import summarize_server_info, topology_from_info
from specperf.engines.sglang.versions import (
    HEALTH_PATH,
    KIND,
    LAUNCH_MODULE,
    SERVE_CLI_SINCE,
    check_supported,
    spec_version,
)
from specperf.errors import EngineStartError


class SglangEngine(ServerEngine):
    """An SGLang server owned by this process (one per EngineSpec per worker)."""

    kind = KIND
    health_path = HEALTH_PATH

    def __init__(self, spec: EngineSpec, devices: Devices, log_dir: Path) -> None:
        super().__init__(spec, devices, log_dir)
        self.sglang_version: Version | None = None

    def launch_plan(self, port: int) -> LaunchPlan:
        """After the fail-fast checks: the env's own server, or the image's under
        ``docker run``; nothing is started."""
        self.sglang_version = spec_version(self.spec)
        check_supported(self.spec, self.sglang_version)
        env = server_env(self.spec, self.devices)
        if not self.spec.image:
            return LaunchPlan(build_command(self.spec, port, self.host, self.sglang_version), env)
        serve = self.sglang_version is not None and self.sglang_version >= SERVE_CLI_SINCE
        default_entry = ("sglang", "serve") if serve else ("python3", "-m", LAUNCH_MODULE)
        entry = [str(a) for a in self.spec.option("container_entrypoint", default_entry)]
        name = container.container_name(self.spec, port)
        args = [*entry, *server_args(self.spec, "0.0.0.0", port)]
        cmd = container.docker_run_command(
            self.spec, self.devices, port, args, container.container_env(env), name
        )
        return LaunchPlan(cmd, {}, container.cleanup_commands(name))

    def connect(self) -> SglangClient:
        client = SglangClient(self.base_url, self.model_name())
        info = client.server_info()
        if info is None:
            raise EngineStartError(
                f"{self.spec.label}: SGLang answered {HEALTH_PATH} but neither /server_info nor "
                "/get_server_info"
            )
        self._client = client  # the record of a refused topology still shows what it resolved
        self._check_resolved(info)
        return client

    def _check_resolved(self, info: Mapping[str, Any]) -> None:
        """SGLang may rewrite the topology; a measured run must have the one it was asked."""
        wanted = topology(self.spec)
        got = topology_from_info(info)
        if wanted != got:
            raise EngineStartError(
                f"{self.spec.label}: SGLang resolved the speculative topology to {got} but "
                f"specperf asked for {wanted}; fix the method's "
                "num_speculative_tokens/topk/num_draft_tokens"
            )

    def client(self) -> SglangClient:
        return cast(SglangClient, super().client())

    def record_facts(self, live: bool) -> RecordFacts:
        facts = RecordFacts(version=str(self.sglang_version) if self.sglang_version else None)
        if live:
            info = self.client().server_info(refresh=True)
            if info:
                facts.server_config = summarize_server_info(info)
                facts.version = str(info.get("version") or facts.version)
        topo = topology(self.spec)
        facts.server_config["requested_topology"] = topo.__dict__ if topo else None
        return facts
