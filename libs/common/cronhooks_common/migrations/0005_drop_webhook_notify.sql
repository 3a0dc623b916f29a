-- The importer no longer hears webhook changes by NOTIFY (0003): it asks the webhook
-- stream's version on every request, which is exact at once where a listener lags.
drop trigger if exists webhook_changed_notify on eventstore.events;
drop function if exists eventstore.notify_webhook_changed();
