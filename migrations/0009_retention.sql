-- Bounds (issue 12.13).
-- 1. The cron finds conversations with new messages from a per-conversation pointer instead of
--    scanning `messages`: `conversations.last_seq` is the newest seq of a message that
--    consolidation reads (not the bot's, not excluded), kept by a trigger on every insert.
ALTER TABLE conversations ADD COLUMN last_seq INTEGER;

CREATE TRIGGER messages_mark_conversation AFTER INSERT ON messages
WHEN NEW.role != 'bot' AND NEW.excluded = 0
BEGIN
  INSERT INTO conversations (conv, chat_id, thread_id, last_seq, updated_at)
  VALUES (
    NEW.conv, NEW.chat_id,
    CASE WHEN instr(NEW.conv, ':') > 0 THEN CAST(substr(NEW.conv, instr(NEW.conv, ':') + 1) AS INTEGER) END,
    NEW.seq, CAST(strftime('%s', 'now') AS INTEGER) * 1000)
  ON CONFLICT (conv) DO UPDATE SET last_seq = MAX(COALESCE(last_seq, 0), NEW.seq);
END;

-- Existing conversations get their pointer once.
INSERT INTO conversations (conv, chat_id, thread_id, last_seq, updated_at)
SELECT m.conv, m.chat_id,
  CASE WHEN instr(m.conv, ':') > 0 THEN CAST(substr(m.conv, instr(m.conv, ':') + 1) AS INTEGER) END,
  MAX(m.seq), CAST(strftime('%s', 'now') AS INTEGER) * 1000
FROM messages m WHERE m.role != 'bot' AND m.excluded = 0
GROUP BY m.conv
ON CONFLICT (conv) DO UPDATE SET last_seq = excluded.last_seq;

-- (The cron reads `conversations`, one row per chat or topic, not `messages`.)

-- 2. Retention: the tables that only grow are pruned by the cron (core::retention) by age;
--    these indexes make each bounded batch a range scan.
CREATE INDEX updates_by_time ON updates (received_at);
CREATE INDEX outbox_by_time ON outbox (created_at);
CREATE INDEX refusals_by_time ON refusals (created_at);
CREATE INDEX budget_charges_by_time ON budget_charges (created_at);
