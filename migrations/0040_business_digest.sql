-- Telegram Business, second part (issue 49): the digest, and suggestions that end with
-- Telegram's 24-hour window. Additive: the previous release never reads these columns (it
-- writes suggestions without `window_ends`, which the sweep then dates by `created_at`).
--
-- `business_digest_at`: when the owner's last digest (`/business digest`) was sent; the next
-- one covers the business chats since then.
ALTER TABLE users ADD COLUMN business_digest_at INTEGER;

-- `window_ends`: when Telegram stops letting the bot reply in the chat (seconds: the burst's
-- newest contact message's date plus 24 hours); a pending suggestion past it is withdrawn by
-- the cron, and Send says why instead of trying.
ALTER TABLE business_suggestions ADD COLUMN window_ends INTEGER;

-- The open suggestions, by owner: the cron's sweep and an owner's withdrawals read only these.
CREATE INDEX business_suggestions_pending ON business_suggestions (owner_id) WHERE status = 'pending';
