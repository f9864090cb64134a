-- Access levels as a checked enum, refused messages kept out of every model call, budgets.

-- users.access takes exactly the levels of agent_core::policy::UserAccess (NULL: the policy's
-- default). SQLite cannot add a CHECK to a column in place: rebuild the table, keeping rows.
CREATE TABLE users_new (
  user_id     INTEGER PRIMARY KEY,
  name        TEXT NOT NULL,
  username    TEXT,
  is_bot      INTEGER NOT NULL DEFAULT 0,
  access      TEXT CHECK (access IN ('allowed', 'blocked')),
  access_note TEXT,
  updated_at  INTEGER NOT NULL
);
INSERT INTO users_new (user_id, name, username, is_bot, access, access_note, updated_at)
  SELECT user_id, name, username, is_bot,
         CASE WHEN access IN ('allowed', 'blocked') THEN access END, access_note, updated_at
  FROM users;
DROP TABLE users;
ALTER TABLE users_new RENAME TO users;

-- 1: the sender was refused by the access policy when the message arrived (blocked, awaiting
-- approval, not on a list, a stranger in an unapproved group). Kept for the audit trail; never
-- in history, consolidation or any model call.
ALTER TABLE messages ADD COLUMN excluded INTEGER NOT NULL DEFAULT 0;

-- One row per reply-asking message admitted within its sender's hourly budget
-- (USER_TURNS_PER_HOUR counts these: every turn needs at least one).
CREATE TABLE budget_charges (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  chat_id    INTEGER NOT NULL,
  user_id    INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX budget_charges_by_user ON budget_charges (user_id, created_at);

-- The budget check reads this chat's latest budget refusals (one notice per window).
CREATE INDEX IF NOT EXISTS refusals_by_chat_reason ON refusals (chat_id, reason, created_at);
