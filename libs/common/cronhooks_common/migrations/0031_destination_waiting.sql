-- CONTRACT §17: what waits in each dispatcher process for a destination's limits or hold,
-- told to the others every half second by the process itself (cronhooks_common.
-- destination_state.tell_waiting). Two readers:
-- * the admin page's Destinations section: how many wait per destination, over replicas;
-- * the scheduler's watchdog: a delivery that waits here long (or is sent after a long
--   wait) is not overdue, it waits its turn (`long_waits`); its deadline moves on.
-- A row is as fresh as its `seen_at` (the database's time, not a service clock: it says
-- the process is alive); rows of a process that stopped telling go stale within seconds
-- and are deleted by the others' next prune.
create table shared.destination_waiting (
    destination  text         not null,
    process      text         not null,  -- host:pid:random of one dispatcher process
    waiting      integer      not null check (waiting >= 0),
    long_waits   bigint[]     not null default '{}',  -- delivery ids held here for long
    seen_at      timestamptz  not null,
    primary key (destination, process)
);
