-- One record per turn (issue 50), continued; additive like 0037 (the new form written, both
-- forms read; the old tables stay for the previous release).
--
-- A conversation's own model calls (consolidation's) are kept in its row, as a turn's are in
-- its own (0037): `calls`, a JSON array with the columns of `model_calls`, appended by the
-- statement that moves the consolidation's watermark anyway (or, where the job's lease was
-- lost, by one that writes only them): no row of their own and no index entry (`model_calls`
-- wrote 3 rows per call, and 2 more when the cron pruned it). The write that appends keeps
-- those of the retention window (`RETENTION_DAYS`) and at most the newest 1,500
-- (`storage::consolidation::CallsKept`); an idle conversation keeps its calls until it is
-- consolidated again. The same write counts the day's tokens of those calls (`call_tokens` of
-- the UTC day `call_day`, ms), which the budget check reads without opening the calls. The
-- `token_days` counter is bumped by a statement in the same batch, as a turn's batch does.
-- Calls of media, pictures and guest answers stay in `model_calls`.
ALTER TABLE conversations ADD COLUMN calls TEXT;
ALTER TABLE conversations ADD COLUMN call_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN call_day INTEGER;

-- Every model call, in each form (0037's view, with the conversations' calls).
DROP VIEW calls;
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
   WHERE t.calls IS NOT NULL
  UNION ALL
  SELECT c.key, NULL, v.conv, v.chat_id, json_extract(c.value, '$.purpose'), json_extract(c.value, '$.model'), json_extract(c.value, '$.status'),
         json_extract(c.value, '$.prompt_tokens'), json_extract(c.value, '$.candidates_tokens'), json_extract(c.value, '$.cached_tokens'),
         json_extract(c.value, '$.thoughts_tokens'), json_extract(c.value, '$.total_tokens'), json_extract(c.value, '$.finish_reason'), json_extract(c.value, '$.error'),
         json_extract(c.value, '$.duration_ms'), json_extract(c.value, '$.created_at'), json_extract(c.value, '$.search_queries'), json_extract(c.value, '$.persona'),
         json_extract(c.value, '$.image_tokens')
    FROM conversations v, json_each(v.calls) c
   WHERE v.calls IS NOT NULL;

-- A turn's answer chunk is recorded by the bot's message under `chunk_key`, which has no index:
-- a re-run of the turn's step finds it among the conversation's messages after the turn's
-- `upto_seq` (every chunk of a turn comes after the newest message its answer saw), on
-- `messages_by_conv` (`storage::outbox::SELECT_STEP`, `chat_state::chunk_anchor`). Its
-- `send_key` entry (0037) was one row written per chunk. Chunks of other sends (commands,
-- notices, apologies) keep `send_key`; the previous release writes `send_key` for all.
ALTER TABLE messages ADD COLUMN chunk_key TEXT;

-- Every send with its key, in each form (0037's view, with the chunks' `chunk_key`).
DROP VIEW sends;
CREATE VIEW sends AS
  SELECT key, conv, chat_id, method, status, tg_message_id, attempts, plain, error, created_at, sent_at FROM outbox
  UNION ALL
  SELECT COALESCE(send_key, chunk_key), conv, chat_id, 'sendMessage', 'sent', message_id, NULL, NULL, NULL, date * 1000, date * 1000
    FROM messages WHERE send_key IS NOT NULL OR chunk_key IS NOT NULL;
