-- Whoever caches a webhook's state (the importer, judging api_tokens by the webhook's
-- current patterns) hears of every change at once: a NOTIFY with the webhook id, sent at
-- the commit of any webhook.* event, whichever service appended it.
create function eventstore.notify_webhook_changed() returns trigger language plpgsql as $$
begin
    perform pg_notify('cronhooks_webhooks', new.data->>'webhook_id');
    return null;
end $$;

create trigger webhook_changed_notify
    after insert on eventstore.events
    for each row when (new.type like 'webhook.%')
    execute function eventstore.notify_webhook_changed();
