-- The conversation record and everything the bot does with it.
-- Times: *_at columns are unix milliseconds; messages.date is Telegram's unix seconds.
-- Telegram ids are bound as numbers below 2^53 (D1 cannot bind BigInt).

-- Every webhook delivery, once: the dedup of update_id.
CREATE TABLE updates (
  update_id   INTEGER PRIMARY KEY,
  kind        TEXT NOT NULL,
  chat_id     INTEGER,
  outcome     TEXT NOT NULL,            -- always 'stored' (ignored and malformed updates are not recorded)
  received_at INTEGER NOT NULL
);

CREATE TABLE chats (
  chat_id        INTEGER PRIMARY KEY,
  kind           TEXT NOT NULL,         -- private | group | supergroup | channel
  title          TEXT,
  username       TEXT,
  is_forum       INTEGER NOT NULL DEFAULT 0,
  model          TEXT,                  -- per-chat GEMINI_MODEL override
  blocked_at     INTEGER,               -- Telegram said 403: blocked or removed; nothing is sent
  blocked_reason TEXT,
  first_seen_at  INTEGER NOT NULL,
  last_seen_at   INTEGER NOT NULL
);

CREATE TABLE users (
  user_id     INTEGER PRIMARY KEY,
  name        TEXT NOT NULL,
  username    TEXT,
  is_bot      INTEGER NOT NULL DEFAULT 0,
  access      TEXT,                     -- allowed | blocked | NULL (policy default)
  access_note TEXT,
  updated_at  INTEGER NOT NULL
);

-- One row per conversation (a chat, or a forum topic): its session window and long-term state.
CREATE TABLE conversations (
  conv               TEXT PRIMARY KEY,  -- "chat_id" or "chat_id:thread_id"
  chat_id            INTEGER NOT NULL,
  thread_id          INTEGER,
  session_start_seq  INTEGER NOT NULL DEFAULT 0,
  session_started_at INTEGER,
  plan               TEXT,              -- the agent's set_plan
  history_cut_seq    INTEGER,           -- messages before this seq were over the budget last turn
  updated_at         INTEGER NOT NULL
);

CREATE TABLE messages (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,
  conv           TEXT NOT NULL,
  chat_id        INTEGER NOT NULL,
  message_id     INTEGER,               -- Telegram's id; NULL for events without one (reactions)
  role           TEXT NOT NULL,         -- user | bot | event
  user_id        INTEGER,
  name           TEXT NOT NULL,
  username       TEXT,
  is_bot         INTEGER NOT NULL DEFAULT 0,
  parts          TEXT NOT NULL,         -- JSON array of parts (agent_core::conversation::Part)
  text           TEXT NOT NULL,         -- the parts rendered compactly, for search and prompts
  reply_to       INTEGER,
  forwarded_from TEXT,
  media_group_id TEXT,
  date           INTEGER NOT NULL,
  edited_at      INTEGER,
  update_id      INTEGER,
  turn_id        TEXT,                  -- bot messages: the turn that sent them
  UNIQUE (chat_id, message_id)
);
CREATE INDEX messages_by_conv ON messages (conv, seq);
CREATE INDEX messages_by_user ON messages (user_id, seq);
CREATE INDEX messages_by_update ON messages (update_id);

-- One row per agent turn: what the model returned (exactly), the plan, how it ended.
CREATE TABLE turns (
  turn_id           TEXT PRIMARY KEY,   -- "conv/n"
  conv              TEXT NOT NULL,
  chat_id           INTEGER NOT NULL,
  status            TEXT NOT NULL,      -- running | planned | done | stale | retrying | failed | dead
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
  empty_reason      TEXT,
  error             TEXT,
  attempts          INTEGER NOT NULL DEFAULT 0,
  history_cut_seq   INTEGER,
  subrequests       INTEGER,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL
);
CREATE INDEX turns_by_conv ON turns (conv, created_at);

-- Every outgoing action, recorded before it is sent and marked after: a retry never sends twice.
CREATE TABLE outbox (
  key           TEXT PRIMARY KEY,       -- "turn_id/step/chunk", "cmd:chat:message", ...
  step_key      TEXT NOT NULL,          -- the key without the chunk
  conv          TEXT NOT NULL,
  chat_id       INTEGER NOT NULL,
  method        TEXT NOT NULL,
  body          TEXT NOT NULL,
  status        TEXT NOT NULL,          -- pending | sent | failed
  tg_message_id INTEGER,
  attempts      INTEGER NOT NULL DEFAULT 0,
  plain         INTEGER NOT NULL DEFAULT 0, -- sent as plain text after Telegram refused the HTML
  error         TEXT,
  created_at    INTEGER NOT NULL,
  sent_at       INTEGER
);
CREATE INDEX outbox_by_step ON outbox (step_key);

-- Usage of every model call, for cost tracking.
CREATE TABLE model_calls (
  id                INTEGER PRIMARY KEY AUTOINCREMENT,
  turn_id           TEXT,
  conv              TEXT,
  chat_id           INTEGER,
  purpose           TEXT NOT NULL,      -- turn | consolidate | embed
  model             TEXT NOT NULL,
  status            INTEGER NOT NULL,   -- HTTP status; 0 for network errors
  prompt_tokens     INTEGER NOT NULL DEFAULT 0,
  candidates_tokens INTEGER NOT NULL DEFAULT 0,
  cached_tokens     INTEGER NOT NULL DEFAULT 0,
  thoughts_tokens   INTEGER NOT NULL DEFAULT 0,
  total_tokens      INTEGER NOT NULL DEFAULT 0,
  finish_reason     TEXT,
  error             TEXT,
  duration_ms       INTEGER NOT NULL,
  created_at        INTEGER NOT NULL
);
CREATE INDEX model_calls_by_chat ON model_calls (chat_id, created_at);
CREATE INDEX model_calls_by_time ON model_calls (created_at);

-- Access control.
CREATE TABLE refusals (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  chat_id    INTEGER NOT NULL,
  user_id    INTEGER,
  reason     TEXT NOT NULL,
  created_at INTEGER NOT NULL
);

CREATE TABLE pairings (
  code        TEXT PRIMARY KEY,
  user_id     INTEGER NOT NULL,
  chat_id     INTEGER NOT NULL,
  name        TEXT,
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  approved_at INTEGER,
  approved_by TEXT
);
CREATE INDEX pairings_by_user ON pairings (user_id, expires_at);

-- Notes: written by the agent (remember) or by an operator (curated, always shown first).
CREATE TABLE notes (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  chat_id       INTEGER,
  about_user_id INTEGER,
  content       TEXT NOT NULL,
  source        TEXT NOT NULL,          -- agent | operator
  created_at    INTEGER NOT NULL
);
CREATE INDEX notes_by_chat ON notes (chat_id);
CREATE INDEX notes_by_user ON notes (about_user_id);

-- Failures the operator should see: dead letters and errors.
CREATE TABLE failures (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  kind       TEXT NOT NULL,             -- dead_letter | error
  job_key    TEXT,
  conv       TEXT,
  detail     TEXT NOT NULL,
  body       TEXT,
  created_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX failures_dead_letter_key ON failures (job_key) WHERE kind = 'dead_letter';
CREATE INDEX failures_by_time ON failures (created_at);
