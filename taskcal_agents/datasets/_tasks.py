"""Default task files for the converted data sets (``taskcal data convert --task-out``).

=========== ==================================================================================
when2call,  ``tasks.tool_decision`` with the cost matrix [[0, 1, 2], [4, 0, 2], [4, 1, 0]]
bfcl        (row = truth, column = action; order tool_call, request_for_info, cannot_answer)
            and its default ``unparsed: other`` (unparsed samples are evidence)
simpleqa,   ``tasks.answer_or_abstain(answer_clusters="lexical")``: the N answers are clustered
nq-open     by meaning, the belief is the modal cluster's share and the label whether the
            modal answer is right; a wrong answer costs 4, abstaining on a question the
            model would have answered correctly costs 1
mmlu        labels A-D, 0-1 cost, the ``choice`` parser on the letters; with ``abstain_cost``
            (``--abstain-cost`` of ``taskcal data convert``) a fifth action ``abstain`` that
            costs that much whatever the truth (a wrong letter costs 1)
stsb        ``tasks.rating(k=6, low=scale_min)`` (L1 cost): labels 0-5 (or 1-6 with
            ``scale_min=1``)
=========== ==================================================================================

These are starting points: a deployment edits the costs (and the prompt) in the file.
"""

from __future__ import annotations

from typing import Any

from taskcal_agents.decision import ParserSpec, Task, answer_or_abstain, rating, tool_decision
from taskcal_agents.errors import ConfigurationError

WHEN2CALL_COST = ((0.0, 1.0, 2.0), (4.0, 0.0, 2.0), (4.0, 1.0, 0.0))
"""Costs of the When2Call evaluation: calling a tool when the model should ask or cannot
answer costs 4, asking when it should call or cannot answer costs 1, abstaining when it
should call or ask costs 2."""


def default_task(name: str, **options: Any) -> Task:
    """The default task for the converter *name* (see the module docstring).

    Args:
        name: A converter name.
        **options: The converter options used (``scale_min`` for ``stsb``), and for
            ``mmlu`` the task option ``abstain_cost`` (a number in (0, 1): add an ``abstain``
            action with that cost).

    Returns:
        The task.

    Raises:
        ConfigurationError: Unknown name.
    """
    if name in ("when2call", "bfcl"):
        return tool_decision(cost=[list(r) for r in WHEN2CALL_COST], name=name)
    if name in ("simpleqa", "nq-open"):
        return answer_or_abstain(name=name, answer_clusters="lexical")
    if name == "mmlu":
        labels = ["A", "B", "C", "D"]
        cost = [[0.0 if i == j else 1.0 for j in range(4)] for i in range(4)]
        abstain = options.get("abstain_cost")
        if abstain is None:
            return Task(
                name="mmlu",
                labels=labels,
                cost=cost,
                parser=ParserSpec(name="choice", options={"labels": labels}),
            )
        if not 0.0 < float(abstain) < 1.0:
            msg = (
                f"mmlu abstain_cost must lie strictly between 0 (always abstain) and 1 (never), "
                f"got {abstain!r}."
            )
            raise ConfigurationError(msg)
        return Task(
            name="mmlu_abstain",
            labels=labels,
            actions=[*labels, "abstain"],
            cost=[[*row, float(abstain)] for row in cost],
            parser=ParserSpec(name="choice", options={"labels": labels}),
            abstain_action="abstain",
            fallback_action="abstain",
        )
    if name == "stsb":
        low = int(options.get("scale_min", 0))
        return rating(k=6, low=low, name="stsb")
    msg = (
        f"default task name must be one of ['bfcl', 'mmlu', 'nq-open', 'simpleqa', 'stsb', "
        f"'when2call'], got {name!r}."
    )
    raise ConfigurationError(msg)
