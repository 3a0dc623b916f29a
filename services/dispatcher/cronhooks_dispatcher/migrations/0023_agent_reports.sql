-- CONTRACT §16.1: an answer's costs and logs are recorded with its attempt's outcome event.
-- An attempt that waits for the importer's verdict keeps them (as agent_report.to_data
-- writes them, null when there are none) until that event is written.
alter table dispatcher.attempts add column report jsonb;
