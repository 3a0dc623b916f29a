-- CONTRACT §17 destination limits: state in Postgres, not in a process, so every dispatcher
-- replica applies a change at once (each reads these small tables every half second:
-- cronhooks_common.destination_state). A destination is `scheme://host:port`
-- (cronhooks_common.destination_key).

-- setDestinationLimit's overrides, written by admin-api in the transaction that appends
-- `destination.limit_set`. A row with both limits null is never kept (that removes it).
create table shared.destination_limits (
    destination     text             primary key,
    max_concurrent  integer          check (max_concurrent between 1 and 10000),
    max_per_second  double precision check (max_per_second > 0),
    set_by          text             not null,
    set_at          timestamptz      not null,
    check (max_concurrent is not null or max_per_second is not null)
);

-- Holds: a 429 or 503 with Retry-After holds every delivery to the destination until
-- `held_until` (at most an hour ahead), on every replica; written by the dispatcher that
-- got the answer. A later answer only lengthens a hold (greatest). Rows past their time
-- mean nothing and are deleted by the readers now and then.
create table shared.destination_holds (
    destination  text         primary key,
    held_until   timestamptz  not null,
    status       integer      not null,  -- 429 or 503: what asked for it
    set_at       timestamptz  not null
);
