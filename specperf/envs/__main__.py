"""``python -m specperf.envs`` = ``specperf env``."""

import argparse

from specperf.envs import add_arguments, run

_parser = argparse.ArgumentParser(prog="python -m specperf.envs")
add_arguments(_parser)
raise SystemExit(run(_parser.parse_args()))
