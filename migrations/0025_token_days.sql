-- The bot's tokens per UTC day, kept as one counter row a day (issue 40's rows read). The budget
-- check before each turn asked for the bot's tokens of the day (`GLOBAL_TOKENS_PER_DAY`) by
-- summing every model call of the day: rows read grew with the square of a day's turns (about
-- 5 million, the Free plan's daily limit, at about 3,000 answered messages a day). Now it reads
-- this table's one row for the day.
--
-- A trigger keeps the counter, so it is exact and crash-safe: the model call's insert and the
-- counter's update are one statement (one transaction), whoever inserts the call (this
-- release, the previous one, an operator's SQL). A call of no tokens writes nothing here.
-- `day_ms` is the day's UTC midnight in milliseconds (`agent_core::limits::day_start`), the
-- rowid: one row written a call. The cron prunes it with `model_calls`
-- (`agent_core::background::retention`).
--
-- Paid for by `model_calls_by_time`: the cron prunes `model_calls` in rowid order (its rows
-- are written in time order), and the costs API's all-chats totals read the table's rows of
-- the period anyway. A chat's own totals and its daily tokens keep `model_calls_by_chat`.
-- The previous release's statements still work without the index (they read more rows).
CREATE TABLE token_days (
  day_ms INTEGER PRIMARY KEY,
  tokens INTEGER NOT NULL DEFAULT 0
);

INSERT INTO token_days (day_ms, tokens)
  SELECT created_at - created_at % 86400000, SUM(total_tokens) FROM model_calls
  WHERE total_tokens != 0 GROUP BY created_at - created_at % 86400000;

CREATE TRIGGER model_calls_count_tokens AFTER INSERT ON model_calls
WHEN NEW.total_tokens != 0 BEGIN
  INSERT INTO token_days (day_ms, tokens) VALUES (NEW.created_at - NEW.created_at % 86400000, NEW.total_tokens)
    ON CONFLICT (day_ms) DO UPDATE SET tokens = tokens + excluded.tokens;
END;

DROP INDEX model_calls_by_time;
