-- Schedules: reminders and follow-ups the bot set with schedule_message (issue 16).
-- The chat object's alarm fires them; the cron re-arms objects whose next run has passed.
-- A run is claimed by moving next_run_ms from the due time (a conditional update), so it
-- fires once under alarm retries, queue retries and restarts.
CREATE TABLE schedules (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  chat_id         INTEGER NOT NULL,
  conv            TEXT NOT NULL,
  creator_user_id INTEGER,
  text            TEXT NOT NULL,
  timezone        TEXT NOT NULL,
  -- A recurring schedule's canonical 5-field cron expression; NULL for a one-off.
  repeat          TEXT,
  -- The next run (ms since the epoch); NULL once nothing is left to run.
  next_run_ms     INTEGER,
  status          TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'done', 'cancelled', 'missed')),
  runs            INTEGER NOT NULL DEFAULT 0,
  last_run_ms     INTEGER,
  -- The turn that carried out the last run.
  last_turn_id    TEXT,
  -- The turn whose schedule_message created it: a retried turn creates it once.
  origin_turn_id  TEXT,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
);
CREATE INDEX schedules_due ON schedules (status, next_run_ms);
CREATE INDEX schedules_conv ON schedules (conv, status);
CREATE INDEX schedules_chat ON schedules (chat_id, status);
CREATE UNIQUE INDEX schedules_origin ON schedules (origin_turn_id, text);

-- The chat's time zone: the last one a schedule named explicitly (else TIMEZONE).
ALTER TABLE chats ADD COLUMN timezone TEXT;

-- Google Search queries a grounded call ran (WEB_SEARCH): billed per query, not per token.
ALTER TABLE model_calls ADD COLUMN search_queries INTEGER NOT NULL DEFAULT 0;
