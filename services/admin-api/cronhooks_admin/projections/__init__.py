"""The admin read models (admin.webhooks, deliveries, attempts, notes, agent jobs,
alerts), projected from the event store: apply.py says which event makes which, one
module per area applies them, queries.py holds their SQL; projector.py follows the store
live (live_tail.py), rebuild.py replays it whole."""
