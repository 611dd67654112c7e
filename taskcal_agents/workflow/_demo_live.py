"""The demo's live decisions: a few tool-use requests decided through the runtime path.

N fresh completions per request, drawn with the request's tools (the sampling function of
``taskcal sample``) → :meth:`~taskcal_agents.decision.Decider.decide` with the
request's :class:`~taskcal_agents.parsing.GroundingContext`, under the calibrator
shipped for the model (:func:`live_calibrator`) or, where none is, a Dirichlet map fitted on
the other requests (:func:`decide_live`); a call decision sends a grounded call, an ask decision
a question that names the missing argument (:class:`ShownDecision`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage

    from taskcal_agents.datasets import DatasetItem
    from taskcal_agents.decision import CalibratorArtefact, Decision, Task
    from taskcal_agents.workflow._runner import SampleSettings

__all__ = ["ShownDecision", "decide_live", "live_calibrator", "shown_items"]


@dataclass
class ShownDecision:
    """One request decided live, with the belief behind the decision.

    Attributes:
        text: The user's request.
        truth: Its true label.
        tools: The names of the tools offered with it.
        decision: The runtime's decision (p̂, q, expected cost per action, the grounding
            counts and the message it sends).
        calibrator: Which map decided.
    """

    text: str
    truth: str
    tools: tuple[str, ...]
    decision: Decision
    calibrator: str = ""
    """Which map decided: the shipped calibrator (by its content id), or the Dirichlet map
    fitted on the other requests where none is shipped for the model."""
    bar: float | None = None
    """The q(tool_call) above which the effect of the decision's call sends it unconfirmed,
    the rest of the belief on asking (:func:`~taskcal_agents.decision._terms.call_bar`);
    ``None`` without effects."""

    @property
    def reply(self) -> str | None:
        """What the agent does: the call it sends, else the text it replies with.

        A call reads as ``get_weather(city='Paris')``; ``None`` when the decision carries
        no message.
        """
        from taskcal_agents.parsing import call_text

        message = self.decision.message
        if message is None:
            return None
        if message.tool_calls:
            return "; ".join(call_text(call) for call in message.tool_calls)
        return str(message.content)


def shown_items(task: Task, items: Sequence[DatasetItem], show: int) -> list[DatasetItem]:
    """*show* items, taking the task's labels in turn (the first item of each label first)."""
    queues = [[i for i in items if i.label == label] for label in task.labels]
    out: list[DatasetItem] = []
    while len(out) < show and any(queues):
        for queue in queues:
            if queue and len(out) < show:
                out.append(queue.pop(0))
    return out


def live_calibrator(task: Task, model: str) -> CalibratorArtefact | None:
    """The shipped calibrator the live decisions use for ``model``, or ``None``.

    The one ``calibrator="auto"`` picks for a front door with its default N and temperature
    (:mod:`taskcal_agents.decision._shipped`); ``None`` (silently: the demo says which map
    decided) when none is shipped for ``model``.
    """
    from taskcal_agents.decision import (
        DEFAULT_N_SAMPLES,
        DEFAULT_TEMPERATURE,
        ServedSettings,
        UncalibratedWarning,
        auto_artefact,
    )

    served = ServedSettings(model, DEFAULT_N_SAMPLES, DEFAULT_TEMPERATURE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncalibratedWarning)
        return auto_artefact(task, served, owner="taskcal demo")


def decide_live(
    task: Task,
    items: Sequence[DatasetItem],
    shown: Sequence[DatasetItem],
    path: Path,
    sampler: Any,
    settings: SampleSettings,
    shipped: CalibratorArtefact | None = None,
) -> list[ShownDecision]:
    """Decide *shown* live: by the ``shipped`` calibrator, else a map fitted on the others.

    The runtime path: N fresh completions drawn with the request's tools (the sampling
    function of ``taskcal sample``) → :meth:`Decider.decide` with the request's grounding
    context (its tools and messages), as the Runnable and the middleware decide. With a
    shipped calibrator the completions are drawn under its record's N, temperature and
    length limit and it decides (:meth:`Decider.from_resolved`, as ``calibrator="auto"``);
    otherwise the workflow's Dirichlet map fitted on the other requests' samples decides.
    Each decision carries the bar its call's effect had to clear (:attr:`ShownDecision.bar`).
    """
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from taskcal_agents.decision import Decider, call_bar, resolve_calibrator
    from taskcal_agents.workflow._calibrator_specs import (
        default_factory,
    )
    from taskcal_agents.workflow._crossfit import calibrator_inputs
    from taskcal_agents.workflow._data import eval_arrays
    from taskcal_agents.workflow._runner import (
        _draw,
        build_messages,
        item_context,
        offered_tool_names,
    )
    from taskcal_agents.workflow._store import read_samples

    if shipped is not None:
        sampling = shipped.metadata["record"]["sampling"]
        live = dataclasses.replace(
            settings, n=sampling["n"], temperature=sampling["temperature"],
            max_tokens=sampling["max_tokens"],
        )  # fmt: skip
        decider = Decider.from_resolved(task, resolve_calibrator(shipped, task, owner="demo"))
        label = f"shipped calibrator {shipped.content_id}"

        def decider_for(item: DatasetItem) -> Decider:
            return decider
    else:
        live, label = settings, "Dirichlet map fitted on the other requests"
        data = eval_arrays(task, read_samples(path), ids=sorted(item.id for item in items))
        X, make, _ = calibrator_inputs(data, default_factory("dirichlet"))
        ids = np.asarray(data.ids)

        def decider_for(item: DatasetItem) -> Decider:
            keep = (ids != item.id) & data.served
            return Decider(task, make().fit(X[keep], data.y[keep]))

    def draw(item: DatasetItem) -> list[AIMessage]:
        names = offered_tool_names(item)
        samples, _ = _draw(
            sampler, build_messages(task, item), live, item.tools or None, None, names
        )
        return samples

    # The requests are drawn concurrently, as `taskcal sample` draws items: one decoding batch.
    with ThreadPoolExecutor(max_workers=max(1, len(shown)), thread_name_prefix="demo") as pool:
        drawn = list(pool.map(draw, shown))
    out = []
    for item, samples in zip(shown, drawn, strict=True):
        names = offered_tool_names(item)
        decision = decider_for(item).decide(
            samples, tool_names=names, context=item_context(task, item)
        )
        text, truth = str(item.messages[-1]["content"]), str(item.label)
        bar = call_bar(task, decision.effect) if decision.effect is not None else None
        out.append(ShownDecision(text, truth, names, decision, label, bar))
    return out
