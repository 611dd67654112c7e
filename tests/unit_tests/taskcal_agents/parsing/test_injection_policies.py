"""The injection replay's policy files: each a valid trust policy and a full effect table."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from taskcal_agents.decision import ToolEffects
from taskcal_agents.parsing import TrustPolicy

POLICIES = Path(__file__).parents[4] / "benchmarks" / "injection_policies"
SUITES = ("banking", "slack", "travel", "workspace")


@pytest.mark.parametrize("suite", SUITES)
def test_each_suite_file_is_a_trust_policy_with_the_tools_effects(suite: str) -> None:
    data = yaml.safe_load((POLICIES / f"{suite}.yaml").read_text(encoding="utf-8"))
    policy = TrustPolicy.model_validate(data["trust"])
    assert policy.warrant.effects == ("write", "irreversible")  # the default warrant rule
    effects = ToolEffects(tools=data["effects"]["tools"])
    # every suite has tools of each effect, and a tool that only returns data is a read
    assert set(effects.tools.values()) == {"read", "write", "irreversible"}
    assert all(effects.tools[n] == "read" for n in effects.tools if n.startswith("get_"))
