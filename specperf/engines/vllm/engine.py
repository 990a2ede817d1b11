"""A vLLM OpenAI server owned by this process: the release checks before anything starts
(versions.py: a method the release lacks; parser_check.py: the release's own parser over the
command), the launch plan (direct or in a container), the client, and the facts recorded."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import cast

from specperf.engines import container
from specperf.engines.base import Devices, EngineSpec
from specperf.engines.server_engine import LaunchPlan, RecordFacts, ServerEngine
from specperf.engines.vllm.client import VllmClient
from specperf.engines.vllm.command import (
    build_command,
    cpu_placement,
    private_tmpdir,
    server_args,
    server_env,
)
from specperf.engines.vllm.parser_check import check_command
from specperf.engines.vllm.releases import upstream_compare
from specperf.engines.vllm.startup_log import parse_non_default_args, parse_startup_facts
from specperf.engines.vllm.versions import (
    KIND,
    Release,
    check_supported,
    is_v0_on_cpu,
    logs_non_default_args,
    spec_release,
    streams_token_ids,
)
from specperf.placement import Placement

# ---------------------------------------------------------------- engine


class VllmEngine(ServerEngine):
    """A vLLM OpenAI server owned by this process (one per EngineSpec per worker).

    Before a start: the release is found (``options.vllm_version``, the env's installed
    package, or the image tag), a method it lacks raises UnsupportedError (NOT EVALUATED), and
    the command is parsed by the release's own parser (``options.parser_check = false`` skips
    it; images are not checked)."""

    kind = KIND
    # the upstream changes between two releases (specperf watch bisect prints it)
    upstream_compare = staticmethod(upstream_compare)

    def __init__(self, spec: EngineSpec, devices: Devices, log_dir: Path) -> None:
        super().__init__(spec, devices, log_dir)
        self.release: Release | None = None

    @property
    def on_cpu(self) -> bool:
        return not self.devices.gpus

    def cpu_placement(self) -> Placement | None:
        return cpu_placement(self.spec, self.devices)

    def launch_plan(self, port: int) -> LaunchPlan:
        """Direct (the env's python) or in a container (``docker run``, removed on stop), after
        the release checks. Direct: the server gets its own temporary directory, removed when
        it stops."""
        self.release = spec_release(self.spec)
        version = self.release.version if self.release else None
        check_supported(self.spec, self.release, self.on_cpu)
        env = server_env(self.spec, self.devices)
        if not self.spec.image:
            argv = build_command(self.spec, port, self.host, version)
            if self.spec.option("parser_check", True):
                check_command(self.spec, self.spec.python or sys.executable, argv[3:], self.release)
            env, cleanup = private_tmpdir(env, self.spec.env)
            return LaunchPlan(argv, env, cleanup)
        name = container.container_name(self.spec, port)
        args = [
            *self.spec.option("container_entrypoint", ()),
            *server_args(self.spec, "0.0.0.0", port, version),
        ]
        cmd = container.docker_run_command(
            self.spec, self.devices, port, args, container.container_env(env), name
        )
        return LaunchPlan(cmd, {}, container.cleanup_commands(name))

    def connect(self) -> VllmClient:
        version = self.release.version if self.release else None
        client = VllmClient(
            self.base_url, self.model_name(), return_token_ids=streams_token_ids(version)
        )
        if self.spec.option("server_info", True):
            client.server_config()  # slow first call: now, not during a measurement
        return client

    def client(self) -> VllmClient:
        return cast(VllmClient, super().client())

    def record_facts(self, live: bool) -> RecordFacts:
        """Version and /server_info while live; the start-up facts of the log always."""
        facts = super().record_facts(live)
        version = self.release.version if self.release else None
        if facts.version is None and self.release is not None:
            facts.version = str(version)
        if self.release is not None:
            facts.server_config["release"] = str(self.release)
        if self.on_cpu and is_v0_on_cpu(version):
            facts.notes.append(
                f"{self.release}: V0 engine on CPU; drafts = emitted − accepted tokens, and its "
                "spec-decode counters refresh at most every 5 s"
            )
        if self.server is not None:
            log_text = self.server.log_path.read_text(errors="replace")
            non_default = parse_non_default_args(log_text)
            if non_default is not None:
                facts.server_config["non_default_args"] = non_default
            elif logs_non_default_args(version):
                facts.notes.append("vLLM's 'non-default args' start-up line not found in the log")
            facts.server_config.update(parse_startup_facts(log_text))
        return facts
