"""One bindable per type of the schema that has resolvers of its own: the modules of this
package attach their resolvers to these (`@query.field("notes")`), schema.py binds them."""

from __future__ import annotations

from datetime import date

from ariadne import EnumType, MutationType, ObjectType, QueryType, ScalarType, UnionType

query = QueryType()
mutation = MutationType()
cron_webhook = ObjectType("CronWebhook")
change_webhook = ObjectType("ChangeWebhook")
cron_webhook_delivery = ObjectType("CronWebhookDelivery")
delivery_attempt = ObjectType("DeliveryAttempt")
run = ObjectType("Run")  # CONTRACT §16.2
delivery_trigger = EnumType(
    "DeliveryTrigger",
    {"SCHEDULE": "schedule", "MANUAL": "manual", "RETRY": "retry", "CHANGE": "change"},
)
# What pushNotes, commitNotes and hideNotes answer: the importer's answer (notes.py).
push_notes_result = UnionType("PushNotesOrErrorPayload")
commit_notes_result = UnionType("CommitNotesOrErrorPayload")
hide_notes_result = UnionType("HideNotesOrErrorPayload")
# DailyCost.day (CONTRACT §16.1): output only.
date_scalar = ScalarType("Date", serializer=date.isoformat)

BINDABLES = (
    query,
    mutation,
    cron_webhook,
    change_webhook,
    cron_webhook_delivery,
    delivery_attempt,
    run,
    delivery_trigger,
    push_notes_result,
    commit_notes_result,
    hide_notes_result,
    date_scalar,
)
