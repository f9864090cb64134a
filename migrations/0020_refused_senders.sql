-- What a refused sender costs (issue 35, item 3): every update the access policy refused wrote
-- its update row, its message (marked excluded, kept as long as the conversation) and, through
-- the chat object, a refusal row; one persistent stranger could spend the Free plan's daily D1
-- writes. Now the webhook's batch counts a refused sender's updates per hour in one row here
-- (`agent_core::policy::RefusedLimit`) before anything else, and records the update, the
-- message and the hand-off to the chat object only for the first REFUSED_UPDATES_PER_HOUR of
-- them; past it the counter stops at the limit + 1 and nothing is written. The cron prunes the
-- counters, and refused messages past RETENTION_DAYS (through the partial index below, which
-- holds refused messages only: an admitted message writes nothing more).
CREATE TABLE refused_senders (
  -- The start of the hour (ms): first, so the prune's range reads the key.
  window_start INTEGER NOT NULL,
  -- The person, or the chat for a message with no person.
  sender INTEGER NOT NULL,
  n INTEGER NOT NULL DEFAULT 0,
  last_at INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (window_start, sender)
);
CREATE INDEX messages_refused ON messages (date) WHERE excluded = 1;
