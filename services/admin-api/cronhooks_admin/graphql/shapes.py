"""The shape the GraphQL layer hands to Ariadne, named.

Resolvers return read-model rows as mappings from SDL field (snake_case, Ariadne's
convert_names_case) to value: a row of whichever query, handed on as it is. Typed per SDL
type they would repeat the .graphql files; named here they say what they are. (A
mutation's `input` is typed where its command takes it: validation.WebhookInput,
agents.CreateAgentInput, api_keys.CreateApiKeyInput, cronhooks_common.note_inputs.)
"""

from __future__ import annotations

from typing import Any

# An SDL object as a resolver returns it: field name -> value (a read-model row, a payload).
GraphQLObject = dict[str, Any]
