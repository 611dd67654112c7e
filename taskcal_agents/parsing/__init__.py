"""g_T: from one sampled completion to a task label, and what the samples say besides.

A :class:`Parser` reads one completion's label (the built-in ones by name through
:func:`get_parser`; a custom one with :func:`register_parser`). Tool calls a model wrote as
text are read with :func:`parse_tool_calls` / :func:`extract_tool_calls`; whether a call's
arguments are stated by the user is judged against a :class:`GroundingContext`, which also
records each value's :class:`Source` and, under a :class:`TrustPolicy`, the values no trusted
source supplies (:class:`TrustViolation`; argument kinds by :func:`argument_kind`); free-text
answers are grouped by meaning with :func:`cluster_answers`; after a tool result,
:func:`is_tool_result_turn` tells the turn apart and :func:`tool_result_reply` reports what the
tools returned.

``__all__`` is the public surface. The other names imported below are what the library's
other packages use (the grounding of sampled calls, answer clusters, tool turns,
structured-output constraints, answer grading, the relevance features): they are not part
of the API.
"""

from __future__ import annotations

from taskcal_agents.parsing._answer_clusters import AnswerClusters as AnswerClusters
from taskcal_agents.parsing._answer_clusters import (
    EntailmentJudgeFactory as EntailmentJudgeFactory,
)
from taskcal_agents.parsing._answer_clusters import cluster_answers
from taskcal_agents.parsing._answer_clusters import cluster_samples as cluster_samples
from taskcal_agents.parsing._answer_clusters import clusters_from_record as clusters_from_record
from taskcal_agents.parsing._answer_clusters import clusters_record as clusters_record
from taskcal_agents.parsing._answer_clusters import entailment_judge as entailment_judge
from taskcal_agents.parsing._answer_clusters import modal_labels as modal_labels
from taskcal_agents.parsing._answer_clusters import question_of as question_of
from taskcal_agents.parsing._answer_clusters import sample_answers as sample_answers
from taskcal_agents.parsing._argument_kinds import ARGUMENT_KINDS, argument_kind
from taskcal_agents.parsing._constraints import LEGACY_GUIDED_FIELDS as LEGACY_GUIDED_FIELDS
from taskcal_agents.parsing._constraints import (
    check_structured_outputs as check_structured_outputs,
)
from taskcal_agents.parsing._constraints import choice_constraint as choice_constraint
from taskcal_agents.parsing._effects import EFFECTS as EFFECTS
from taskcal_agents.parsing._effects import Effect as Effect
from taskcal_agents.parsing._effects import EffectSource as EffectSource
from taskcal_agents.parsing._effects import ToolEffect as ToolEffect
from taskcal_agents.parsing._effects import declared_effect as declared_effect
from taskcal_agents.parsing._effects import effect_severity as effect_severity
from taskcal_agents.parsing._grading import grade_answer as grade_answer
from taskcal_agents.parsing._grading import normalize_answer as normalize_answer
from taskcal_agents.parsing._grounding import CallGrounding as CallGrounding
from taskcal_agents.parsing._grounding import GroundingContext
from taskcal_agents.parsing._grounding import SampleGrounding as SampleGrounding
from taskcal_agents.parsing._grounding import call_agreement as call_agreement
from taskcal_agents.parsing._grounding import confirmation_calls as confirmation_calls
from taskcal_agents.parsing._grounding import grounded_message as grounded_message
from taskcal_agents.parsing._grounding import mentions as mentions
from taskcal_agents.parsing._grounding import missing_arguments as missing_arguments
from taskcal_agents.parsing._grounding import modal_grounding as modal_grounding
from taskcal_agents.parsing._grounding import question_for as question_for
from taskcal_agents.parsing._grounding import sent_args as sent_args
from taskcal_agents.parsing._labels import UNPARSED_REASONS as UNPARSED_REASONS
from taskcal_agents.parsing._labels import Parser
from taskcal_agents.parsing._labels import tool_names_of as tool_names_of
from taskcal_agents.parsing._labels import unparsed_reason as unparsed_reason
from taskcal_agents.parsing._labels import with_offered_tools as with_offered_tools
from taskcal_agents.parsing._provenance import Source
from taskcal_agents.parsing._questions import CONFIRM_METADATA_KEY as CONFIRM_METADATA_KEY
from taskcal_agents.parsing._questions import approval_message as approval_message
from taskcal_agents.parsing._questions import confirmation_message as confirmation_message
from taskcal_agents.parsing._registry import LABEL_PARSER as LABEL_PARSER
from taskcal_agents.parsing._registry import get_parser, register_parser
from taskcal_agents.parsing._relevance import RELEVANCE_FEATURES as RELEVANCE_FEATURES
from taskcal_agents.parsing._relevance import lexical_fit as lexical_fit
from taskcal_agents.parsing._relevance import relevance_features as relevance_features
from taskcal_agents.parsing._text import message_text as message_text
from taskcal_agents.parsing._text import normalize_text as normalize_text
from taskcal_agents.parsing._tool_calls import canonical_tool_calls as canonical_tool_calls
from taskcal_agents.parsing._tool_calls import extract_tool_calls, parse_tool_calls
from taskcal_agents.parsing._tool_calls import has_written_call as has_written_call
from taskcal_agents.parsing._tool_calls import with_tool_calls as with_tool_calls
from taskcal_agents.parsing._tool_turns import answered_tool_calls as answered_tool_calls
from taskcal_agents.parsing._tool_turns import call_text as call_text
from taskcal_agents.parsing._tool_turns import is_repeat_call as is_repeat_call
from taskcal_agents.parsing._tool_turns import is_tool_result_turn, tool_result_reply
from taskcal_agents.parsing._tool_turns import unusable_reply as unusable_reply
from taskcal_agents.parsing._trust import TrustPolicy, TrustViolation
from taskcal_agents.parsing._warrant import Warrant, WarrantRule
from taskcal_agents.parsing._warrant import capability as capability

__all__ = [
    "ARGUMENT_KINDS",
    "GroundingContext",
    "Parser",
    "Source",
    "TrustPolicy",
    "TrustViolation",
    "Warrant",
    "WarrantRule",
    "argument_kind",
    "cluster_answers",
    "extract_tool_calls",
    "get_parser",
    "is_tool_result_turn",
    "parse_tool_calls",
    "register_parser",
    "tool_result_reply",
]
