-- Who and what a message replies to, stored with it: the replied-to message may be long gone
-- from the history a turn shows (cut by the budget, an older session, never seen by the bot),
-- yet [meta] (reply_to_user_id, reply_to_name, reply_excerpt) and the compact line still say
-- what it was. Filled by the webhook from Telegram's reply_to_message (or the quoted part).
ALTER TABLE messages ADD COLUMN reply_to_user_id INTEGER;
ALTER TABLE messages ADD COLUMN reply_to_name TEXT;
ALTER TABLE messages ADD COLUMN reply_excerpt TEXT;
