"""Rewrite the fingerprints of committed baseline entries into the path-free form (issue 13).

Why a script and not a re-measurement: the figures stay what they were (seed-note L40 entries
cannot be re-measured here); only how the fingerprint names the model changed, plus the
server-shape fields it now also holds. For every entry the suite that made it is loaded, the
item with the same key gives the new fingerprint, and then:

* ``model`` / ``topology.draft_model`` are the identity of what the entry was MEASURED with
  (its old path or ``tiny:`` reference, through ``specperf.modelid.model_identity`` and the
  suite's declared revision), not of what the suite uses today — cpu-tiny's eagle3 entries were
  made with the random head and stay identified so (stale until re-made with the fitted one);
* every other field of the old fingerprint must equal the new one (the script stops, naming the
  entry and field, otherwise): only fields are added (tokenizer, enforce_eager, reasoning_parser,
  extra_args, env), never a value silently changed.

    python scripts/migrate_fingerprints.py [--check] [FILE ...]   (default: baselines/*.json)

The H200 entries name config-only shape directories that ``scripts/gpu_run.py`` builds; they are
built here at the same place first so their content can be digested.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specperf.baselines import fingerprint_digest  # noqa: E402
from specperf.config import load_suite  # noqa: E402
from specperf.dotted import flatten as _flatten  # noqa: E402
from specperf.modelid import model_identity  # noqa: E402

CHANGED = ("model", "topology.draft_model")


def suite_settings(suite: str, fp: dict[str, Any]) -> dict[str, str]:
    """Settings under which the entry's suite gave the entry's paths."""
    if suite == "h200-transformers" and str(fp["model"]).startswith("/"):
        models_dir = Path(fp["model"]).parent
        sys.path.insert(0, str(ROOT / "scripts"))
        import gpu_run

        gpu_run.build_models(models_dir, "qwen3-8b")
        return {"models_dir": str(models_dir)}
    return {}


def identity(ref: str | None, revision: str | None) -> str | None:
    """The identity of an old reference; an identity already (a second run) stays as it is."""
    if ref and (ref.startswith(("content:", "name:")) or (ref.startswith("tiny:") and "@" in ref)):
        return ref
    return model_identity(ref, revision)


def migrate_entry(key: str, entry: dict[str, Any]) -> dict[str, Any]:
    old = entry["fingerprint"]
    suite_name = entry["provenance"]["suite"]
    suite = load_suite(suite_name, suite_settings(suite_name, old))
    items = {i.key.as_str(): i for i in suite.items(tier=old.get("tier"))}
    if key not in items:
        raise SystemExit(f"{key}: no such item in suite {suite_name}")
    item = items[key]
    new = item.fingerprint_base()
    new["dataset_version"] = old["dataset_version"]
    new["model"] = identity(old["model"], item.model_revision)
    new["topology"]["draft_model"] = identity(
        old["topology"]["draft_model"], item.method.draft_revision
    )
    for ref in (new["model"], new["topology"]["draft_model"]):
        if ref and ref.startswith("name:"):
            raise SystemExit(f"{key}: {ref} (path not readable here; build it or declare it)")
    a, b = _flatten(old), _flatten(new)
    for field in sorted(set(a) - set(CHANGED)):
        if a[field] != b.get(field, "<absent>"):
            raise SystemExit(f"{key}: {field} {a[field]!r} -> {b.get(field)!r}: not a migration")
    return new


def migrate_file(path: Path, check: bool) -> list[str]:
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    changed = []
    for key, entry in data.get("entries", {}).items():
        new = migrate_entry(key, entry)
        if new != entry["fingerprint"]:
            changed.append(key)
            entry["fingerprint"] = new
            entry["fingerprint_digest"] = fingerprint_digest(new)
    out = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if not check and out != text:
        path.write_text(out, encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if out of date")
    args = ap.parse_args(argv)
    files = args.files or sorted((ROOT / "baselines").glob("*.json"))
    stale = 0
    for f in files:
        changed = migrate_file(f, args.check)
        stale += len(changed)
        print(
            f"{f.name}: {len(changed)} fingerprint(s) {'to migrate' if args.check else 'migrated'}"
        )
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
