"""The GraphQL documents tests send more than once, in one place. Each takes its input as
`$input` (or `$id`); a test that asks a question of its own (which fields an update
returns, an input written inline on purpose) keeps that document beside it."""

from __future__ import annotations

# --- cron webhooks ---------------------------------------------------------------------------

CREATE_WEBHOOK = """mutation($input: CreateCronWebhookInput!) { createCronWebhook(input: $input) {
  secret cronWebhook { id nextRunAt } } }"""

# The same, answering with every field a create sets (for the tests of the create itself).
CREATE_WEBHOOK_IN_FULL = """mutation($input: CreateCronWebhookInput!) {
  createCronWebhook(input: $input) {
    secret
    cronWebhook { id url cronSchedule timezone hasSecret enabled nextRunAt nextRuns(count: 3)
                  readPatterns writePatterns timeoutSeconds maxRetries maxDepth
                  concurrencyPolicy catchUpPolicy misfireGraceSeconds consecutiveFailures }
  }
}"""

UPDATE_WEBHOOK = """mutation($input: UpdateCronWebhookInput!) { updateCronWebhook(input: $input) {
  cronWebhook { id nextRunAt enabled } } }"""

TRIGGER_WEBHOOK = """mutation($id: Int!) { triggerCronWebhook(webhookId: $id) { deliveryId } }"""

DELIVERY = """query($id: Int!) { cronWebhookDelivery(id: $id) {
  id status attempt trigger error responseStatus durationMs scheduledFor nextAttemptAt
  attempts { attempt requestBody requestBodyTruncated responseStatus responseBody errorMessage
             durationMs startedAt }
} }"""

DELIVERIES = """query($id: Int!) { cronWebhookDeliveries(cronWebhookId: $id) {
  id status trigger scheduledFor error queuedMs } }"""

REPLAY_DELIVERIES = """mutation($webhookId: Int!, $since: DateTime!, $until: DateTime) {
  replayDeliveries(webhookId: $webhookId, since: $since, until: $until) { deliveryIds } }"""

ALERTS = """query($open: Boolean) { alerts(open: $open) {
  id webhookId kind raisedAt resolvedAt consecutiveFailures lastError disabled } }"""

# --- change webhooks -------------------------------------------------------------------------

CREATE_CHANGE_WEBHOOK = """mutation($input: CreateChangeWebhookInput!) {
  createChangeWebhook(input: $input) {
    secret
    changeWebhook { id url includePatterns excludePatterns onCreate onUpdate onRemove
                    includeContent maxDepth enabled hasSecret consecutiveFailures
                    stats { last7d { total } } }
  }
}"""

UPDATE_CHANGE_WEBHOOK = """mutation($input: UpdateChangeWebhookInput!) {
  updateChangeWebhook(input: $input) { changeWebhook { id includePatterns enabled maxDepth } } }"""

# --- agents ----------------------------------------------------------------------------------

CREATE_AGENT = """mutation($input: CreateAgentInput!) { createAgent(input: $input) {
  accessToken agent { id instanceId callbackUrl } } }"""

# --- api keys ----------------------------------------------------------------------------

CREATE_API_KEY = """mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) {
  key apiKey { id name skipWebhooks createdAt createdBy revokedAt } } }"""

# --- notes (admin-api, and the importer's agent API alike) -----------------------------------

PUSH_NOTES = """mutation($input: PushNotesInput!) { pushNotes(input: $input) { __typename
  ... on PushNotesPayload { notes { id path contentHash version assets { id path } } }
  ... on ErrorPayload { message errors { path error } } } }"""

COMMIT_NOTES = """mutation { commitNotes { __typename
  ... on CommitNotesPayload { success }
  ... on ErrorPayload { message errors { path error } } } }"""

HIDE_NOTES = """mutation($paths: [String!]!) { hideNotes(input: {paths: $paths}) { __typename
  ... on HideNotesPayload { paths }
  ... on ErrorPayload { message errors { path error } } } }"""
