-- Telegram Business, second part (issue 49): the digest, and suggestions that end with
-- Telegram's 24-hour window. Additive: the previous release never reads these columns (it
-- writes suggestions without `window_ends`, which the sweep then dates by `created_at`).
--
-- `business_digest_at`: where the owner's last digest ended (ms); the next one covers the
-- business chats from there. `business_digest_key`: the request whose digest (or answer) was
-- sent last (`cmd:<message id>` or the turn's id), so a replayed request sends nothing again.
ALTER TABLE users ADD COLUMN business_digest_at INTEGER;
ALTER TABLE users ADD COLUMN business_digest_key TEXT;

-- `kept_at`: when the bot kept a business message (ms; Telegram's `date` is in seconds and can
-- be older than the delivery): a digest reads one owner's messages by it, and a message is
-- kept for `RETENTION_DAYS` from it. NULL for the previous release's rows (read by `date`).
ALTER TABLE business_messages ADD COLUMN kept_at INTEGER;
CREATE INDEX business_messages_kept ON business_messages (owner_id, kept_at);

-- `window_ends`: when Telegram stops letting the bot reply in the chat (seconds: the burst's
-- newest contact message's date plus 24 hours); a pending suggestion past it is withdrawn by
-- the cron, and Send says why instead of trying.
ALTER TABLE business_suggestions ADD COLUMN window_ends INTEGER;

-- The open suggestions by the end of their window: the cron's sweep reads only these.
CREATE INDEX business_suggestions_pending ON business_suggestions (window_ends) WHERE status = 'pending';
