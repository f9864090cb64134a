-- One record per turn (issue 50), the bot's answer: a turn's text chunk, once sent, is kept in a
-- row of its own conversation's answers, not as a `messages` row. A bot message in `messages`
-- wrote three rows (the row, `messages_by_conv`, the unique `(chat_id, message_id)` entry);
-- an answer writes one: the table is its key, with no other index.
--
-- `after_seq` is the conversation's newest message (any kind) when the chunk was sent: the
-- answer sits right after it, as the bot's row sat before (its seq was the next one). The key
-- (conversation, place, chunk) is what every reader asks by: a turn's history (the answers
-- after its window's start), a step run again (its chunks after the turn's `upto_seq`), a
-- memory consolidation (the answers from its watermark on), the bot's newest message (a
-- reaction on it asks for a reply). `turn_id`'s row gives a history its `upto_seq`, as it did
-- the bot's messages.
--
-- Only a conversation without a topic keeps its text answers here: a reaction carries no topic,
-- and a reaction on the bot's newest message in a topic finds it by `(chat_id, message_id)`
-- among `messages`. Pictures, stickers, rich and other sends keep their `messages` rows too.
-- The previous release neither writes nor reads this table; bot messages it wrote stay where
-- they are and are read as before (the two forms are merged by place).
CREATE TABLE answers (
  conv       TEXT NOT NULL,
  after_seq  INTEGER NOT NULL,
  chunk_key  TEXT NOT NULL,          -- `<step key>/<chunk>`, as `messages.chunk_key`
  turn_id    TEXT,
  chat_id    INTEGER NOT NULL,
  message_id INTEGER NOT NULL,       -- Telegram's
  user_id    INTEGER,                -- the bot's
  name       TEXT NOT NULL,
  username   TEXT,
  parts      TEXT NOT NULL,
  text       TEXT NOT NULL,
  date       INTEGER NOT NULL,       -- unix seconds, as `messages.date`
  PRIMARY KEY (conv, after_seq, chunk_key)
) WITHOUT ROWID;

-- Every send with its key, in each form (0038's view, with the answers).
DROP VIEW sends;
CREATE VIEW sends AS
  SELECT key, conv, chat_id, method, status, tg_message_id, attempts, plain, error, created_at, sent_at FROM outbox
  UNION ALL
  SELECT COALESCE(send_key, chunk_key), conv, chat_id, 'sendMessage', 'sent', message_id, NULL, NULL, NULL, date * 1000, date * 1000
    FROM messages WHERE send_key IS NOT NULL OR chunk_key IS NOT NULL
  UNION ALL
  SELECT chunk_key, conv, chat_id, 'sendMessage', 'sent', message_id, NULL, NULL, NULL, date * 1000, date * 1000 FROM answers;

-- A conversation's messages in both forms, in order (`ORDER BY seq, apart`): what an operator
-- reads for an audit (and the tests). An answer's `seq` is the message it came after.
CREATE VIEW history AS
  SELECT seq, 0 AS apart, conv, chat_id, message_id, role, user_id, name, parts, text, date, turn_id, excluded FROM messages
  UNION ALL
  SELECT after_seq, 1, conv, chat_id, message_id, 'bot', user_id, name, parts, text, date, turn_id, 0 FROM answers;
