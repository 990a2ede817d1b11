"""A fake ``sglang`` distribution whose ``python -m sglang.launch_server`` runs the stand-in.

Lets ``SglangEngine`` be driven end to end (version lookup through package metadata, launch,
readiness, teardown) on a machine where SGLang cannot serve. Tests put the folder on PYTHONPATH.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def install(target: Path, version: str) -> Path:
    """Write ``sglang/`` and its ``.dist-info`` under ``target``; returns ``target``."""
    pkg = target / "sglang"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (pkg / "launch_server.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO_ROOT)!r})\n"
        "from tests.sglang_standin.server import main\n"
        f"raise SystemExit(main(['--version', {version!r}, *sys.argv[1:]]))\n"
    )
    info = target / f"sglang-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    return target
