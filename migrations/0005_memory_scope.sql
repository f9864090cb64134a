-- Memory kinds are an enum (agent_core::memory::Kind): the table only accepts its values.
-- SQLite adds a CHECK only by rebuilding the table: copy, drop, rename, then recreate the
-- indexes and the triggers that keep memory_fts in step (they were dropped with the old table).
-- memory_fts itself is untouched: its rows refer to memories by id ('m' || id), and ids are kept.
-- A row with any other kind makes this migration fail rather than lose it.

CREATE TABLE memories_new (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  kind          TEXT NOT NULL CHECK (kind IN ('fact', 'episode', 'commitment', 'alias')),
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

INSERT INTO memories_new (id, kind, chat_id, conv, about_user_id, entity, attribute, value, topics, status, due,
    confidence, source_ids, happened_on, superseded_by, embedding, created_at, updated_at)
  SELECT id, kind, chat_id, conv, about_user_id, entity, attribute, value, topics, status, due,
    confidence, source_ids, happened_on, superseded_by, embedding, created_at, updated_at
  FROM memories;

DROP TABLE memories;
ALTER TABLE memories_new RENAME TO memories;

CREATE INDEX memories_by_user ON memories (about_user_id, kind);
CREATE INDEX memories_by_chat ON memories (chat_id, kind);

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
