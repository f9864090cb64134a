-- Pictures the bot makes (issue 39).

-- Image output tokens of a model call (part of candidates_tokens), priced at the model's image
-- output price. The previous release's INSERTs leave it 0.
ALTER TABLE model_calls ADD COLUMN image_tokens INTEGER NOT NULL DEFAULT 0;

-- One row per picture a plan step had made (IMAGE_DAILY_LIMIT per person, IMAGE_CHAT_DAILY_LIMIT
-- per chat, per UTC day), beside budget_charges. `step_key` (turn/step) makes a retried step's
-- charge the same row. Charges two days old go with the next charge.
CREATE TABLE image_charges (
  step_key   TEXT PRIMARY KEY,
  chat_id    INTEGER NOT NULL,
  user_id    INTEGER,
  created_at INTEGER NOT NULL
);
CREATE INDEX image_charges_by_chat ON image_charges (chat_id, created_at);
CREATE INDEX image_charges_by_user ON image_charges (user_id, created_at);

-- A made picture kept until it is sent (base64 in pieces of at most 1,000,000 characters: a
-- D1 value holds at most 2 MB), so a step retried after Telegram failed sends it without
-- making it again. Deleted once sent; pieces older than a day go with the next picture stored.
CREATE TABLE image_parts (
  step_key   TEXT NOT NULL,
  idx        INTEGER NOT NULL,
  mime_type  TEXT NOT NULL,
  caption    TEXT,
  data       TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (step_key, idx)
);
