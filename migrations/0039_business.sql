-- Telegram Business, first part (issue 49): the connections the bot has to people's business
-- accounts, and each owner's mode. Additive: a new table and a new column the previous release
-- never reads (it acknowledges business updates and ignores them).
--
-- One row per connection id, as Telegram's `business_connection` update last said it (`date`:
-- an older redelivery never overwrites a newer state). `rights` is the JSON of the rights the
-- bot reads (`can_reply`, `can_read_messages`); none when Telegram sent none.
-- `refused_told_at`: when the owner, refused by the access policy, was told why (once).
CREATE TABLE business_connections (
  id               TEXT PRIMARY KEY,
  owner_id         INTEGER NOT NULL,
  user_chat_id     INTEGER NOT NULL,
  rights           TEXT NOT NULL DEFAULT '{}',
  is_enabled       INTEGER NOT NULL DEFAULT 0,
  date             INTEGER NOT NULL,
  refused_told_at  INTEGER,
  updated_at       INTEGER NOT NULL
);
CREATE INDEX business_connections_by_owner ON business_connections (owner_id, date);

-- `/business draft|away|auto|off`: the owner's mode (NULL: draft, the default).
ALTER TABLE users ADD COLUMN business_mode TEXT;
