"""``python -m specperf.engine_envs`` = ``specperf env``."""

import argparse

from specperf.engine_envs.cli import add_arguments, run

_parser = argparse.ArgumentParser(prog="python -m specperf.engine_envs")
add_arguments(_parser)
raise SystemExit(run(_parser.parse_args()))
