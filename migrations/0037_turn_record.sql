-- One record per turn (issue 50), the additive step: the new form is written, both forms are
-- read; the old tables stay (the previous release reads and writes them during a deploy) and
-- are dropped in a later release.
--
-- A turn's model calls are kept in the turn's own row (`calls`, a JSON array with the columns of
-- `model_calls`; `tokens`, their total tokens), written by the statement that writes the turn
-- anyway: no row of their own, no index entry (`model_calls` wrote 3 rows per call: the row, its
-- `model_calls_by_chat` entry, the `token_days` counter, which the turn's batch now bumps itself).
-- A chat's turns are found by their key: a turn id begins with its conversation
-- (`<chat>/<ms>-<nonce>`, `<chat>:<topic>/...`), so a conversation's turns of a day are a range
-- of the key, read from each of the chat's conversations (storage::usage::turns_since).
-- Calls outside a turn (consolidation, media, pictures, guest answers) stay in `model_calls`.
ALTER TABLE turns ADD COLUMN calls TEXT;
ALTER TABLE turns ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;

-- A person's unkeyed charges (a reply-asking message) of the last hour, kept in their own row:
-- a JSON array of the charges' times (ms), trimmed to the hour by the write that adds one. One
-- row written per charge (`budget_charges` wrote two, the row and `budget_charges_by_user`, and
-- two more when the cron deleted it). Keyed charges (a reminder's run, a crew's continuation,
-- a guest query) stay in `budget_charges`, whose unique key makes a run charged once.
ALTER TABLE users ADD COLUMN charged TEXT;

-- Every model call, in either form: what an operator reads for an audit (and the tests).
-- `n` orders the calls: `model_calls.id`, or a turn's call's place in its turn.
CREATE VIEW calls AS
  SELECT id AS n, turn_id, conv, chat_id, purpose, model, status, prompt_tokens, candidates_tokens, cached_tokens,
         thoughts_tokens, total_tokens, finish_reason, error, duration_ms, created_at, search_queries, persona, image_tokens
    FROM model_calls
  UNION ALL
  SELECT c.key, t.turn_id, t.conv, t.chat_id, json_extract(c.value, '$.purpose'), json_extract(c.value, '$.model'), json_extract(c.value, '$.status'),
         json_extract(c.value, '$.prompt_tokens'), json_extract(c.value, '$.candidates_tokens'), json_extract(c.value, '$.cached_tokens'),
         json_extract(c.value, '$.thoughts_tokens'), json_extract(c.value, '$.total_tokens'), json_extract(c.value, '$.finish_reason'), json_extract(c.value, '$.error'),
         json_extract(c.value, '$.duration_ms'), json_extract(c.value, '$.created_at'), json_extract(c.value, '$.search_queries'), json_extract(c.value, '$.persona'),
         json_extract(c.value, '$.image_tokens')
    FROM turns t, json_each(t.calls) c
   WHERE t.calls IS NOT NULL;

-- Every budget charge, in either form (a person's row keeps no chat: the budget is theirs).
CREATE VIEW charges AS
  SELECT chat_id, user_id, created_at, charge_key FROM budget_charges
  UNION ALL
  SELECT NULL, u.user_id, c.value, NULL FROM users u, json_each(u.charged) c WHERE u.charged IS NOT NULL;

-- A message chunk sent under an outbox key is recorded by the bot's message alone: the row the
-- history needs anyway, with the key (`send_key`), found by it when a step runs again. The
-- outbox's pending row before the send and its update after (three rows) are not written for
-- it; the key's index entry is one row. Other actions (reactions, pictures, rich and guest
-- messages, ephemeral answers) keep the outbox.
ALTER TABLE messages ADD COLUMN send_key TEXT;
CREATE INDEX messages_by_send_key ON messages (send_key) WHERE send_key IS NOT NULL;

-- Every send with its key, in either form: what an operator reads for an audit (and the tests).
-- A chunk recorded by its message has no request, attempts or plain-text flag of its own.
CREATE VIEW sends AS
  SELECT key, conv, chat_id, method, status, tg_message_id, attempts, plain, error, created_at, sent_at FROM outbox
  UNION ALL
  SELECT send_key, conv, chat_id, 'sendMessage', 'sent', message_id, NULL, NULL, NULL, date * 1000, date * 1000
    FROM messages WHERE send_key IS NOT NULL;
