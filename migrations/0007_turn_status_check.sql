-- Turn statuses are core::status::TurnStatus; the database refuses any other value.
-- SQLite cannot add a CHECK to a table, so the table is rebuilt with its rows (turn ids are
-- now "conv/<start ms>-<nonce>"; older "conv/<n>" ids stay as they are).
CREATE TABLE turns_new (
  turn_id           TEXT PRIMARY KEY,   -- "conv/<start ms>-<random hex>": never repeats
  conv              TEXT NOT NULL,
  chat_id           INTEGER NOT NULL,
  status            TEXT NOT NULL CHECK (status IN ('running', 'planned', 'done', 'stale', 'retrying', 'failed', 'dead')),
  trigger           TEXT,
  target_message_id INTEGER,
  upto_seq          INTEGER,
  model             TEXT,
  history_format    TEXT,
  contents          TEXT,               -- JSON BotTurn: model contents and tool outcomes
  step_outcomes     TEXT NOT NULL DEFAULT '{}', -- JSON {call index: outcome} of plan steps
  plan              TEXT,               -- JSON [Step]
  step_calls        TEXT,               -- JSON [call index | null], per step
  finish_reason     TEXT,
  empty_reason      TEXT,               -- also "no reply, on purpose" when the model chose silence
  error             TEXT,
  attempts          INTEGER NOT NULL DEFAULT 0,
  history_cut_seq   INTEGER,
  subrequests       INTEGER,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  d1_round_trips    INTEGER,
  d1_statements     INTEGER
);
INSERT INTO turns_new (turn_id, conv, chat_id, status, trigger, target_message_id, upto_seq, model, history_format,
  contents, step_outcomes, plan, step_calls, finish_reason, empty_reason, error, attempts, history_cut_seq,
  subrequests, created_at, updated_at, d1_round_trips, d1_statements)
SELECT turn_id, conv, chat_id,
  CASE WHEN status IN ('running', 'planned', 'done', 'stale', 'retrying', 'failed', 'dead') THEN status ELSE 'failed' END,
  trigger, target_message_id, upto_seq, model, history_format,
  contents, step_outcomes, plan, step_calls, finish_reason, empty_reason, error, attempts, history_cut_seq,
  subrequests, created_at, updated_at, d1_round_trips, d1_statements
FROM turns;
DROP TABLE turns;
ALTER TABLE turns_new RENAME TO turns;
CREATE INDEX turns_by_conv ON turns (conv, created_at);
