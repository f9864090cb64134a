-- Telegram Business, first part (issue 49): the connections the bot has to people's business
-- accounts, and each owner's mode. Additive: a new table and a new column the previous release
-- never reads (it acknowledges business updates and ignores them).
--
-- One row per connection id, as Telegram's `business_connection` update last said it
-- (`update_id`: an older update never overwrites a newer state; 0 for a connection looked up
-- with getBusinessConnection; `date` is when the connection was made, which a change keeps).
-- `rights` is the JSON of the rights the bot reads (`can_reply`, `can_read_messages`); none
-- when Telegram sent none.
-- `refused_told_at`: when the owner, refused by the access policy, was told why (once).
CREATE TABLE business_connections (
  id               TEXT PRIMARY KEY,
  owner_id         INTEGER NOT NULL,
  owner_name       TEXT NOT NULL DEFAULT '',
  user_chat_id     INTEGER NOT NULL,
  rights           TEXT NOT NULL DEFAULT '{}',
  is_enabled       INTEGER NOT NULL DEFAULT 0,
  date             INTEGER NOT NULL,
  update_id        INTEGER NOT NULL DEFAULT 0,
  refused_told_at  INTEGER,
  updated_at       INTEGER NOT NULL
);
CREATE INDEX business_connections_by_owner ON business_connections (owner_id, date);

-- `/business draft|away|auto|off`: the owner's mode (NULL: draft, the default);
-- `/business notes …`: what the bot may tell the owner's contacts (at most 2,000 characters).
ALTER TABLE users ADD COLUMN business_mode TEXT;
ALTER TABLE users ADD COLUMN business_notes TEXT;

-- The business chats' messages (owner × contact), apart from `messages`: nothing that reads a
-- conversation (history, memory consolidation, exports, /status) ever sees them, so a business
-- chat is never taken for the contact's private chat with the bot, nor for the owner's. One
-- row per message, keyed by the chat and Telegram's id (a redelivery writes nothing; an edit
-- rewrites the text; a deletion removes it). `side`: contact, owner, bot, offline
-- (`core::business::suggest::Side`); `name`: the sender's, as the message carried it; `text`
-- at most 4,096 characters.
CREATE TABLE business_messages (
  owner_id    INTEGER NOT NULL,
  contact_id  INTEGER NOT NULL,
  message_id  INTEGER NOT NULL,
  side        TEXT NOT NULL,
  name        TEXT NOT NULL DEFAULT '',
  text        TEXT NOT NULL,
  date        INTEGER NOT NULL,
  PRIMARY KEY (owner_id, contact_id, message_id)
) WITHOUT ROWID;

-- A suggested reply (draft mode), one per contact's burst (`upto`: the burst's last message).
-- `status`: pending (shown with its buttons), sending (a Send claimed at `updated_at`), sent,
-- skipped, answered (the owner answered themself), replaced (a newer burst's), disconnected,
-- failed (Telegram refused the send). `html`: the reply as the contact gets it.
CREATE TABLE business_suggestions (
  id             INTEGER PRIMARY KEY,
  owner_id       INTEGER NOT NULL,
  contact_id     INTEGER NOT NULL,
  connection_id  TEXT NOT NULL,
  upto           INTEGER NOT NULL,
  contact_name   TEXT NOT NULL,
  quoted         TEXT NOT NULL,
  html           TEXT NOT NULL,
  status         TEXT NOT NULL DEFAULT 'pending',
  shown_message_id INTEGER,
  sent_message_id  INTEGER,
  created_at     INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL,
  UNIQUE (owner_id, contact_id, upto)
);
-- What BUSINESS_DAILY_LIMIT counts: an owner's suggestions of the day.
CREATE INDEX business_suggestions_by_day ON business_suggestions (owner_id, created_at);
