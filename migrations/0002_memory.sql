-- Long-term memory: what consolidation distils from conversations, summaries of older history,
-- and a full-text index over memories and notes.

CREATE TABLE memories (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  kind          TEXT NOT NULL,            -- fact | episode | commitment | alias
  chat_id       INTEGER,                  -- where it was learned
  conv          TEXT,
  about_user_id INTEGER,                  -- the person it is about (NULL: the chat)
  entity        TEXT,                     -- fact: who/what; commitment: 'bot' or 'user'; alias: the name
  attribute     TEXT,                     -- fact: the attribute; alias: the nickname
  value         TEXT NOT NULL,            -- fact value, episode summary, commitment text, alias sentence
  topics        TEXT,                     -- episode topics, comma-separated
  status        TEXT,                     -- commitment: open | done | expired | cancelled
  due           TEXT,                     -- commitment due date, YYYY-MM-DD
  confidence    REAL NOT NULL DEFAULT 0.7,
  source_ids    TEXT,                     -- JSON [message_id, ...] it came from
  happened_on   TEXT,                     -- episode date, YYYY-MM-DD
  superseded_by INTEGER,                  -- facts: the newer fact that replaced this one
  embedding     TEXT,                     -- JSON [f32, ...] when EMBEDDINGS_MODEL is set
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL
);
CREATE INDEX memories_by_user ON memories (about_user_id, kind);
CREATE INDEX memories_by_chat ON memories (chat_id, kind);

-- One running summary per conversation, covering its messages up to until_seq.
CREATE TABLE summaries (
  conv       TEXT PRIMARY KEY,
  summary    TEXT NOT NULL,
  until_seq  INTEGER NOT NULL,
  messages   INTEGER NOT NULL DEFAULT 0,  -- how many messages it covers
  updated_at INTEGER NOT NULL
);

-- Consolidation watermark: messages up to consolidated_seq have been read once; a lease so two
-- jobs never consolidate the same conversation at once.
ALTER TABLE conversations ADD COLUMN consolidated_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN consolidating_until INTEGER;

-- Full-text search over memories and notes; kept in step by triggers, so a deleted memory is
-- gone from the index too. ref is "m<id>" (memories) or "n<id>" (notes).
CREATE VIRTUAL TABLE memory_fts USING fts5(
  content,
  ref UNINDEXED,
  chat_id UNINDEXED,
  about_user_id UNINDEXED,
  tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
  INSERT INTO memory_fts (content, ref, chat_id, about_user_id)
  VALUES (trim(coalesce(new.entity, '') || ' ' || coalesce(new.attribute, '') || ' ' || new.value || ' ' || coalesce(new.topics, '')),
          'm' || new.id, new.chat_id, new.about_user_id);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
  DELETE FROM memory_fts WHERE ref = 'm' || old.id;
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF value, entity, attribute, topics ON memories BEGIN
  DELETE FROM memory_fts WHERE ref = 'm' || old.id;
  INSERT INTO memory_fts (content, ref, chat_id, about_user_id)
  VALUES (trim(coalesce(new.entity, '') || ' ' || coalesce(new.attribute, '') || ' ' || new.value || ' ' || coalesce(new.topics, '')),
          'm' || new.id, new.chat_id, new.about_user_id);
END;

CREATE TRIGGER notes_fts_insert AFTER INSERT ON notes BEGIN
  INSERT INTO memory_fts (content, ref, chat_id, about_user_id) VALUES (new.content, 'n' || new.id, new.chat_id, new.about_user_id);
END;
CREATE TRIGGER notes_fts_delete AFTER DELETE ON notes BEGIN
  DELETE FROM memory_fts WHERE ref = 'n' || old.id;
END;

-- Notes written before this migration.
INSERT INTO memory_fts (content, ref, chat_id, about_user_id) SELECT content, 'n' || id, chat_id, about_user_id FROM notes;
