-- D1 rows written per message (issue 40). D1 bills every row and every index entry a statement
-- writes, and AUTOINCREMENT's counter row too. An unanswered group message wrote 8 rows: its
-- update's row and that row's index entry (the dedup of Telegram's redeliveries), the message,
-- its three index entries, the AUTOINCREMENT counter and the conversation's pointer. An answered
-- private message wrote 32. What this migration and the code with it take away, without losing
-- what anything reads:
--
--   * the update's row: a message is unique per (chat_id, message_id) and a reaction per update
--     id among reactions (0016's partial index), so the message's own insert is the dedup; the
--     webhook no longer writes `updates` (the table stays for the previous release, which still
--     writes it, and the cron prunes what is in it);
--   * AUTOINCREMENT on `messages`, `model_calls` and `budget_charges`: a rowid is already the
--     largest plus one. AUTOINCREMENT only adds that a rowid of a deleted row is never given
--     again; the only deletes are the cron's prunes, which never delete a table's newest row
--     (`agent_core::background::retention`), so the newest rowid, and with it every later one,
--     stays as it was. Where the messages' counter is ahead of their newest row (its newest
--     rows were pruned), one placeholder row keeps its place (below): a message's seq is what
--     turns, sessions and consolidation point at. Nothing points at a model call's or a budget
--     charge's id;
--   * `messages_by_user` holds only what its two queries read (a person's own admitted
--     messages, `role = 'user' AND excluded = 0`): the bot's messages write no entry;
--   * the conversation's pointer `last_seq` (0009) is written when the conversation gets
--     something to consolidate, not by every message: the cron only asks whether it has
--     something (`last_seq > consolidated_seq`), and consolidation's commit sets it again from
--     the messages (`storage::consolidation::commit`), so a message that came during a
--     consolidation is not left behind;
--   * `budget_charges_by_time`, `outbox_by_time` and `outbox_by_step`: the cron prunes those
--     tables in rowid order (their rows are written in time order), and a step's outbox rows are
--     found by their keys' common prefix (`<step_key>/<chunk>`) on the key's own index.
--
-- Every table keeps its name and columns (migrations/README.md).

-- messages, without AUTOINCREMENT.
CREATE TABLE messages_new (
  seq              INTEGER PRIMARY KEY,
  conv             TEXT NOT NULL,
  chat_id          INTEGER NOT NULL,
  message_id       INTEGER,
  role             TEXT NOT NULL,
  user_id          INTEGER,
  name             TEXT NOT NULL,
  username         TEXT,
  is_bot           INTEGER NOT NULL DEFAULT 0,
  parts            TEXT NOT NULL,
  text             TEXT NOT NULL,
  reply_to         INTEGER,
  forwarded_from   TEXT,
  media_group_id   TEXT,
  date             INTEGER NOT NULL,
  edited_at        INTEGER,
  update_id        INTEGER,
  turn_id          TEXT,
  excluded         INTEGER NOT NULL DEFAULT 0,
  reply_to_user_id INTEGER,
  reply_to_name    TEXT,
  reply_excerpt    TEXT,
  rev              INTEGER,
  UNIQUE (chat_id, message_id)
);
INSERT INTO messages_new (seq, conv, chat_id, message_id, role, user_id, name, username, is_bot, parts, text, reply_to,
    forwarded_from, media_group_id, date, edited_at, update_id, turn_id, excluded, reply_to_user_id, reply_to_name,
    reply_excerpt, rev)
  SELECT seq, conv, chat_id, message_id, role, user_id, name, username, is_bot, parts, text, reply_to,
    forwarded_from, media_group_id, date, edited_at, update_id, turn_id, excluded, reply_to_user_id, reply_to_name,
    reply_excerpt, rev
  FROM messages;
-- The counter's place, if pruned rows had taken it past the newest row: a refused, empty event
-- in no conversation (never read, pruned by the cron once a newer message exists).
INSERT INTO messages_new (seq, conv, chat_id, message_id, role, name, parts, text, date, excluded)
  SELECT s.seq, '', 0, NULL, 'event', '', '[]', '', 0, 1 FROM sqlite_sequence s
  WHERE s.name = 'messages' AND s.seq > (SELECT COALESCE(MAX(seq), 0) FROM messages_new);
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;

CREATE INDEX messages_by_conv ON messages (conv, seq);
CREATE INDEX messages_by_user ON messages (user_id, chat_id) WHERE role = 'user' AND excluded = 0;
CREATE INDEX messages_by_update ON messages (update_id) WHERE message_id IS NULL;
CREATE INDEX messages_edited ON messages (conv, rev) WHERE rev IS NOT NULL;
CREATE INDEX messages_refused ON messages (date) WHERE excluded = 1;

-- The triggers on messages (0009, 0018, 0019, 0021), the pointer's now written only when it
-- changes what the cron sees.
CREATE TRIGGER messages_mark_conversation AFTER INSERT ON messages
WHEN NEW.role != 'bot' AND NEW.excluded = 0
BEGIN
  INSERT INTO conversations (conv, chat_id, thread_id, last_seq, updated_at)
  VALUES (
    NEW.conv, NEW.chat_id,
    CASE WHEN instr(NEW.conv, ':') > 0 THEN CAST(substr(NEW.conv, instr(NEW.conv, ':') + 1) AS INTEGER) END,
    NEW.seq, CAST(strftime('%s', 'now') AS INTEGER) * 1000)
  ON CONFLICT (conv) DO UPDATE SET last_seq = NEW.seq
    WHERE COALESCE(conversations.last_seq, 0) <= conversations.consolidated_seq;
END;
CREATE TRIGGER messages_history_deleted AFTER DELETE ON messages BEGIN
  UPDATE conversations SET history_version = history_version + 1 WHERE conv = OLD.conv;
END;
CREATE TRIGGER messages_history_edited AFTER UPDATE ON messages
WHEN NEW.rev IS OLD.rev AND NEW.excluded IS OLD.excluded BEGIN
  UPDATE messages SET rev = (SELECT COALESCE(MAX(rev), 0) + 1 FROM messages WHERE conv = NEW.conv AND rev IS NOT NULL)
    WHERE seq = NEW.seq;
END;
CREATE TRIGGER messages_history_excluded AFTER UPDATE OF excluded ON messages
WHEN NEW.excluded IS NOT OLD.excluded BEGIN
  UPDATE conversations SET history_version = history_version + 1 WHERE conv = NEW.conv;
END;
CREATE TRIGGER media_messages_stored AFTER INSERT ON messages
WHEN NEW.message_id IS NOT NULL AND instr(NEW.parts, '"file_unique_id"') > 0 BEGIN
  INSERT OR IGNORE INTO media_messages (chat_id, file_unique_id, message_id)
    SELECT NEW.chat_id, json_extract(p.value, '$.file_unique_id'), NEW.message_id FROM json_each(NEW.parts) p
    WHERE json_extract(p.value, '$.file_unique_id') IS NOT NULL;
END;
CREATE TRIGGER media_messages_changed AFTER UPDATE OF parts, message_id ON messages
WHEN NEW.message_id IS NOT NULL AND instr(NEW.parts, '"file_unique_id"') > 0 BEGIN
  INSERT OR IGNORE INTO media_messages (chat_id, file_unique_id, message_id)
    SELECT NEW.chat_id, json_extract(p.value, '$.file_unique_id'), NEW.message_id FROM json_each(NEW.parts) p
    WHERE json_extract(p.value, '$.file_unique_id') IS NOT NULL;
END;

-- model_calls, without AUTOINCREMENT (its ids are kept).
CREATE TABLE model_calls_new (
  id                INTEGER PRIMARY KEY,
  turn_id           TEXT,
  conv              TEXT,
  chat_id           INTEGER,
  purpose           TEXT NOT NULL,
  model             TEXT NOT NULL,
  status            INTEGER NOT NULL,
  prompt_tokens     INTEGER NOT NULL DEFAULT 0,
  candidates_tokens INTEGER NOT NULL DEFAULT 0,
  cached_tokens     INTEGER NOT NULL DEFAULT 0,
  thoughts_tokens   INTEGER NOT NULL DEFAULT 0,
  total_tokens      INTEGER NOT NULL DEFAULT 0,
  finish_reason     TEXT,
  error             TEXT,
  duration_ms       INTEGER NOT NULL,
  created_at        INTEGER NOT NULL,
  search_queries    INTEGER NOT NULL DEFAULT 0,
  persona           TEXT
);
INSERT INTO model_calls_new (id, turn_id, conv, chat_id, purpose, model, status, prompt_tokens, candidates_tokens,
    cached_tokens, thoughts_tokens, total_tokens, finish_reason, error, duration_ms, created_at, search_queries, persona)
  SELECT id, turn_id, conv, chat_id, purpose, model, status, prompt_tokens, candidates_tokens,
    cached_tokens, thoughts_tokens, total_tokens, finish_reason, error, duration_ms, created_at, search_queries, persona
  FROM model_calls;
DROP TABLE model_calls;
ALTER TABLE model_calls_new RENAME TO model_calls;
CREATE INDEX model_calls_by_chat ON model_calls (chat_id, created_at);
CREATE INDEX model_calls_by_time ON model_calls (created_at);

-- budget_charges, without AUTOINCREMENT and its time index.
CREATE TABLE budget_charges_new (
  id         INTEGER PRIMARY KEY,
  chat_id    INTEGER NOT NULL,
  user_id    INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
INSERT INTO budget_charges_new (id, chat_id, user_id, created_at)
  SELECT id, chat_id, user_id, created_at FROM budget_charges;
DROP TABLE budget_charges;
ALTER TABLE budget_charges_new RENAME TO budget_charges;
CREATE INDEX budget_charges_by_user ON budget_charges (user_id, created_at);

-- The outbox keeps its key's index only.
DROP INDEX outbox_by_step;
DROP INDEX outbox_by_time;
