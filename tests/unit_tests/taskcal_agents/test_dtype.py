"""The serving dtype: chosen in one place, with its reason, overridable, never given twice."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from taskcal_agents import _dtype
from taskcal_agents._dtype import GemmProbe, choose_dtype, cpu_flags
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.serving import VLLMServer

AVX2 = frozenset({"avx", "avx2", "fma"})
ZEN4 = AVX2 | {"avx512f", "avx512_bf16"}


def test_cpu_flags_reads_the_flags_line(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nflags\t: other\n")
    assert cpu_flags(info) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_an_avx2_cpu_serves_in_float32_without_a_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_dtype, "probe_gemm", lambda *a: pytest.fail("no probe without flags"))
    choice = choose_dtype(flags=AVX2, env={}, python=sys.executable)
    assert choice.dtype == "float32"
    assert choice.source == "detected"
    assert "avx512_bf16" in choice.reason
    assert choice.args() == ["--dtype", "float32"]


def test_bf16_flags_are_confirmed_by_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_dtype, "probe_gemm", lambda python, env: GemmProbe(300.0, 100.0))
    fast = choose_dtype(flags=ZEN4, env={}, python="py")
    assert (fast.dtype, fast.source) == ("bfloat16", "detected")
    assert "300 GFLOP/s in bf16 against 100" in fast.reason
    # Flags that lie (a VM that lists avx512_bf16 but traps it): the probe wins.
    monkeypatch.setattr(_dtype, "probe_gemm", lambda python, env: GemmProbe(30.0, 100.0))
    slow = choose_dtype(flags=ZEN4, env={}, python="py")
    assert slow.dtype == "float32"
    assert "30 GFLOP/s in bf16" in slow.reason
    # No probe possible (no interpreter given, or it failed): the flags decide.
    assert choose_dtype(flags=ZEN4, env={}).dtype == "bfloat16"
    monkeypatch.setattr(_dtype, "probe_gemm", lambda python, env: None)
    assert choose_dtype(flags=ZEN4, env={}, python="py").dtype == "bfloat16"


def test_a_capped_onednn_means_float32(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_dtype, "probe_gemm", lambda *a: pytest.fail("no probe under a cap"))
    choice = choose_dtype(flags=ZEN4, env={"ONEDNN_MAX_CPU_ISA": "avx2"}, python="py")
    assert choice.dtype == "float32"
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in choice.reason


def test_overrides_in_order_and_a_dtype_given_twice_is_refused() -> None:
    env = {"TASKCAL_DTYPE": "bfloat16"}
    assert choose_dtype("float32", flags=ZEN4, env=env).dtype == "float32"
    from_env = choose_dtype(flags=AVX2, env=env)
    assert (from_env.dtype, from_env.source) == ("bfloat16", "environment")
    kept = choose_dtype(flags=AVX2, env=env, extra_args=["--dtype=half"])
    assert (kept.dtype, kept.source, kept.args()) == ("half", "extra_args", [])
    with pytest.raises(ConfigurationError, match="give it once"):
        choose_dtype("float32", extra_args=["--dtype", "bfloat16"])
    with pytest.raises(ConfigurationError, match="dtype must be 'auto' or one of"):
        choose_dtype("fp8")
    with pytest.raises(ConfigurationError, match=r"\$TASKCAL_DTYPE must be"):
        choose_dtype(env={"TASKCAL_DTYPE": "int4"}, flags=AVX2)
    gpu = choose_dtype(device="gpu", env={})
    assert gpu.dtype is None
    assert gpu.args() == []


def test_the_server_passes_its_choice_and_writes_it_to_the_log(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_dtype, "cpu_flags", lambda path="": AVX2)
    monkeypatch.delenv("TASKCAL_DTYPE", raising=False)
    server = VLLMServer(tmp_path, port=8127)
    argv = server.launch_spec().argv
    assert argv[argv.index("--dtype") + 1] == "float32"
    assert server.dtype_choice is not None
    assert server.dtype_choice.source == "detected"
    pinned = VLLMServer(tmp_path, port=8127, dtype="bfloat16").launch_spec().argv
    assert pinned[pinned.index("--dtype") + 1] == "bfloat16"
    passed = VLLMServer(tmp_path, port=8127, extra_args=["--dtype", "float16"]).launch_spec().argv
    assert passed.count("--dtype") == 1
    assert passed[passed.index("--dtype") + 1] == "float16"
    with pytest.raises(ConfigurationError, match="give it once"):
        VLLMServer(tmp_path, dtype="float32", extra_args=["--dtype", "bfloat16"])
    with pytest.raises(ConfigurationError, match="dtype must be"):
        VLLMServer(tmp_path, dtype="fp32")


def test_the_probe_runs_the_given_interpreter_in_the_given_environment(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text(
        '#!/bin/sh\necho "warming up"\necho "{\\"bfloat16\\": $BF16, \\"float32\\": 10}"\n'
    )
    fake.chmod(0o755)
    assert _dtype.probe_gemm(str(fake), {"BF16": "30.5"}) == GemmProbe(30.5, 10.0)
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'Traceback: no torch'\nexit 1\n")
    broken.chmod(0o755)
    assert _dtype.probe_gemm(str(broken), {}) is None
    assert _dtype.probe_gemm(str(tmp_path / "missing"), {}) is None


def test_the_gpu_path_gets_neither_cpu_blocks_nor_preloads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TASKCAL_DTYPE", raising=False)
    spec = VLLMServer(tmp_path, port=8128, device="gpu").launch_spec()
    assert "--block-size" not in spec.argv
    assert "--dtype" not in spec.argv  # vLLM's default on a GPU
    assert "LD_PRELOAD" not in spec.env


def test_a_callers_preload_is_added_after_ours_not_instead() -> None:
    from taskcal_agents.serving._process import _merged_env

    env = _merged_env({"LD_PRELOAD": "/lib/tc.so:/lib/iomp.so"}, {"LD_PRELOAD": "/x.so:/lib/tc.so"})
    assert env["LD_PRELOAD"] == "/lib/tc.so:/lib/iomp.so:/x.so"
    assert _merged_env({}, {"LD_PRELOAD": "/x.so"})["LD_PRELOAD"] == "/x.so"


def test_the_log_opens_with_the_dtype_and_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import subprocess

    from taskcal_agents.errors import ServerStartupError

    monkeypatch.setattr(_dtype, "cpu_flags", lambda path="": AVX2)
    monkeypatch.delenv("TASKCAL_DTYPE", raising=False)

    def no_server(*args: object, **kwargs: object) -> None:
        raise OSError("not started in a unit test")

    monkeypatch.setattr(subprocess, "Popen", no_server)
    log = tmp_path / "server.log"
    with pytest.raises(ServerStartupError):
        VLLMServer(tmp_path, port=8129, log_path=log).start()
    first = log.read_text().splitlines()[0]
    assert first.startswith("# taskcal: dtype float32 (the CPU has neither avx512_bf16")
