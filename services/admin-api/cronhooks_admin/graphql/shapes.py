"""The two shapes the GraphQL layer hands to and takes from Ariadne, named.

Resolvers return read-model rows as mappings from SDL field (snake_case, Ariadne's
convert_names_case) to value, and mutations receive their `input` as Ariadne parsed it;
commands/validation.py judges every field of an input before anything uses it. Typed per
SDL type they would repeat the .graphql files; named here they say what they are.
"""

from __future__ import annotations

from typing import Any

# An SDL object as a resolver returns it: field name -> value (a read-model row, a payload).
GraphQLObject = dict[str, Any]
# A mutation's `input` argument as Ariadne parsed it, before validation.
GraphQLInput = dict[str, Any]
