-- A turn's row written as one row (issue 40): `turns` had a rowid, so its text key was an index
-- entry of its own, and `turns_by_conv` another: a turn's insert wrote three rows. Now the key
-- is the table (WITHOUT ROWID): one row. A conversation's turns are found by their key, which
-- starts with the conversation (`<conv>/<start ms>-<nonce>`, `agent_core::chat_state::turn_id`),
-- so `turns_by_conv` goes: `turn_id > '<conv>/' AND turn_id < '<conv>0'` reads the same rows.
-- The table keeps its name, columns and CHECK (migrations/README.md); nothing prunes it, so no
-- statement of the previous release reads its rowid.
CREATE TABLE turns_new (
  turn_id           TEXT PRIMARY KEY,
  conv              TEXT NOT NULL,
  chat_id           INTEGER NOT NULL,
  status            TEXT NOT NULL CHECK (status IN ('running', 'planned', 'done', 'stale', 'retrying', 'failed', 'dead')),
  trigger           TEXT,
  target_message_id INTEGER,
  upto_seq          INTEGER,
  model             TEXT,
  history_format    TEXT,
  contents          TEXT,
  step_outcomes     TEXT NOT NULL DEFAULT '{}',
  plan              TEXT,
  step_calls        TEXT,
  finish_reason     TEXT,
  empty_reason      TEXT,
  error             TEXT,
  attempts          INTEGER NOT NULL DEFAULT 0,
  history_cut_seq   INTEGER,
  subrequests       INTEGER,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  d1_round_trips    INTEGER,
  d1_statements     INTEGER
) WITHOUT ROWID;
INSERT INTO turns_new (turn_id, conv, chat_id, status, trigger, target_message_id, upto_seq, model, history_format,
    contents, step_outcomes, plan, step_calls, finish_reason, empty_reason, error, attempts, history_cut_seq,
    subrequests, created_at, updated_at, d1_round_trips, d1_statements)
  SELECT turn_id, conv, chat_id, status, trigger, target_message_id, upto_seq, model, history_format,
    contents, step_outcomes, plan, step_calls, finish_reason, empty_reason, error, attempts, history_cut_seq,
    subrequests, created_at, updated_at, d1_round_trips, d1_statements
  FROM turns;
DROP TABLE turns;
ALTER TABLE turns_new RENAME TO turns;

-- 0018's trigger on turns, dropped with the old table.
CREATE TRIGGER turns_history_placed AFTER UPDATE OF upto_seq ON turns
WHEN OLD.upto_seq IS NOT NEW.upto_seq BEGIN
  UPDATE conversations SET history_version = history_version + 1 WHERE conv = NEW.conv;
END;
