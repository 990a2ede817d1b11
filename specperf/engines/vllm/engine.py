"""A vLLM OpenAI server owned by this process: launch plan (direct or in a container),
client, and the facts recorded about it."""

from __future__ import annotations

from typing import cast

from specperf.engines import container
from specperf.engines.server_engine import LaunchPlan, RecordFacts, ServerEngine
from specperf.engines.vllm.client import VllmClient
from specperf.engines.vllm.command import (
    KIND,
    build_command,
    cpu_placement,
    private_tmpdir,
    server_args,
    server_env,
)
from specperf.engines.vllm.releases import upstream_compare
from specperf.engines.vllm.startup_log import parse_non_default_args, parse_startup_facts
from specperf.placement import Placement

# ---------------------------------------------------------------- engine


class VllmEngine(ServerEngine):
    """A vLLM OpenAI server owned by this process (one per EngineSpec per worker)."""

    kind = KIND
    # the upstream changes between two releases (specperf watch bisect prints it)
    upstream_compare = staticmethod(upstream_compare)

    def cpu_placement(self) -> Placement | None:
        return cpu_placement(self.spec, self.devices)

    def launch_plan(self, port: int) -> LaunchPlan:
        """Direct (the env's python) or in a container (``docker run``, removed on stop).
        Direct: the server gets its own temporary directory, removed when it stops."""
        env = server_env(self.spec, self.devices)
        if not self.spec.image:
            env, cleanup = private_tmpdir(env, self.spec.env)
            return LaunchPlan(build_command(self.spec, port, self.host), env, cleanup)
        name = container.container_name(self.spec, port)
        args = [
            *self.spec.option("container_entrypoint", ()),
            *server_args(self.spec, "0.0.0.0", port),
        ]
        cmd = container.docker_run_command(
            self.spec, self.devices, port, args, container.container_env(env), name
        )
        return LaunchPlan(cmd, {}, container.cleanup_commands(name))

    def connect(self) -> VllmClient:
        client = VllmClient(self.base_url, self.model_name())
        if self.spec.option("server_info", True):
            client.server_config()  # slow first call: now, not during a measurement
        return client

    def client(self) -> VllmClient:
        return cast(VllmClient, super().client())

    def record_facts(self, live: bool) -> RecordFacts:
        """Version and /server_info while live; the start-up facts of the log always."""
        facts = super().record_facts(live)
        if self.server is not None:
            log_text = self.server.log_path.read_text(errors="replace")
            non_default = parse_non_default_args(log_text)
            if non_default is not None:
                facts.server_config["non_default_args"] = non_default
            else:
                facts.notes.append("vLLM's 'non-default args' start-up line not found in the log")
            facts.server_config.update(parse_startup_facts(log_text))
        return facts
