-- Media descriptions (issue 14): one short text per media item, keyed by Telegram's
-- file_unique_id (the same file sent again, or by someone else, has the same key), made once
-- and kept, so history, memory and search never need the bytes again. Bytes are never stored.
CREATE TABLE media (
  file_unique_id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  mime TEXT,
  size INTEGER,
  -- ok: described; unsupported / too_large: never viewable; failed: the description call
  -- failed `attempts` times (not retried past the limit).
  status TEXT NOT NULL CHECK (status IN ('ok', 'unsupported', 'too_large', 'failed')),
  attempts INTEGER NOT NULL DEFAULT 0,
  description TEXT,
  -- What is said in a voice note, audio or video, when there is speech.
  transcript TEXT,
  model TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
