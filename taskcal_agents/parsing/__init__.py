"""g_T: from one sampled completion to a task label, and what the samples say besides.

``text`` (a completion's text), ``tool_calls`` (tool calls written as text), ``labels`` (the
built-in label parsers), ``registry`` (parsers by name; custom ones), ``grounding`` (are a
call's arguments stated by the user?), ``answer_clusters`` (free-text answers grouped by
meaning), ``tool_turns`` (the turn after a tool result), ``constraints`` (structured-output
constraints for the server), ``grading`` (answers against gold).
"""

from __future__ import annotations

from taskcal_agents.parsing.answer_clusters import (
    ENTAILMENT_CHOICES,
    ENTAILMENT_PROMPT,
    AnswerClusters,
    ChoiceSampler,
    EntailmentJudgeFactory,
    answer_tokens,
    answers_equivalent,
    cluster_answers,
    cluster_samples,
    clusters_from_record,
    clusters_record,
    entailment_judge,
    modal_labels,
    question_of,
    sample_answers,
)
from taskcal_agents.parsing.constraints import (
    LEGACY_GUIDED_FIELDS,
    STRUCTURED_OUTPUT_KINDS,
    check_structured_outputs,
    choice_constraint,
    json_constraint,
)
from taskcal_agents.parsing.grading import (
    DEFAULT_F1_THRESHOLD,
    DEFAULT_MAX_CONTAINMENT_TOKENS,
    contains_tokens,
    grade_answer,
    normalize_answer,
    token_f1,
)
from taskcal_agents.parsing.grounding import (
    ArgumentCheck,
    CallGrounding,
    GroundingContext,
    SampleGrounding,
    call_agreement,
    grounded_message,
    mentions,
    missing_arguments,
    question_for,
    sent_args,
    tool_schemas,
)
from taskcal_agents.parsing.labels import (
    UNPARSED_REASONS,
    AnswerOrAbstainParser,
    ChoiceParser,
    Parser,
    RatingParser,
    ToolDecisionParser,
    tool_names_of,
    unparsed_reason,
    with_offered_tools,
)
from taskcal_agents.parsing.registry import (
    SchemaParser,
    builtin_parser_names,
    get_parser,
    register_parser,
    registered_parser_names,
)
from taskcal_agents.parsing.text import (
    message_text,
    normalize_text,
)
from taskcal_agents.parsing.tool_calls import (
    ContentToolCalls,
    canonical_tool_calls,
    extract_tool_calls,
    has_written_call,
    parse_tool_calls,
    with_tool_calls,
)
from taskcal_agents.parsing.tool_turns import (
    answered_tool_calls,
    call_text,
    is_repeat_call,
    is_tool_result_turn,
    last_tool_results,
    tool_result_reply,
    unusable_reply,
)

__all__ = [
    "DEFAULT_F1_THRESHOLD",
    "DEFAULT_MAX_CONTAINMENT_TOKENS",
    "ENTAILMENT_CHOICES",
    "ENTAILMENT_PROMPT",
    "LEGACY_GUIDED_FIELDS",
    "STRUCTURED_OUTPUT_KINDS",
    "UNPARSED_REASONS",
    "AnswerClusters",
    "AnswerOrAbstainParser",
    "ArgumentCheck",
    "CallGrounding",
    "ChoiceParser",
    "ChoiceSampler",
    "ContentToolCalls",
    "EntailmentJudgeFactory",
    "GroundingContext",
    "Parser",
    "RatingParser",
    "SampleGrounding",
    "SchemaParser",
    "ToolDecisionParser",
    "answer_tokens",
    "answered_tool_calls",
    "answers_equivalent",
    "builtin_parser_names",
    "call_agreement",
    "call_text",
    "canonical_tool_calls",
    "check_structured_outputs",
    "choice_constraint",
    "cluster_answers",
    "cluster_samples",
    "clusters_from_record",
    "clusters_record",
    "contains_tokens",
    "entailment_judge",
    "extract_tool_calls",
    "get_parser",
    "grade_answer",
    "grounded_message",
    "has_written_call",
    "is_repeat_call",
    "is_tool_result_turn",
    "json_constraint",
    "last_tool_results",
    "mentions",
    "message_text",
    "missing_arguments",
    "modal_labels",
    "normalize_answer",
    "normalize_text",
    "parse_tool_calls",
    "question_for",
    "question_of",
    "register_parser",
    "registered_parser_names",
    "sample_answers",
    "sent_args",
    "token_f1",
    "tool_names_of",
    "tool_result_reply",
    "tool_schemas",
    "unparsed_reason",
    "unusable_reply",
    "with_offered_tools",
    "with_tool_calls",
]
