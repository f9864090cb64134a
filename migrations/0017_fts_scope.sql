-- D1 rows per turn (issue 17, section 3). A turn's recall matched the newest messages' words
-- against the memories of every chat, then kept its own: D1 counted every match of every chat
-- as a row read (a common word over 2,400 memories of 8 chats: 5,100 rows for 12 results), and
-- each memory update or delete scanned the whole index for its `ref` (an UNINDEXED column).
--
-- The index is rebuilt with:
--   * `scope`, an indexed column of tokens: `c<chat>` for the chat a row was learned in (`cm<n>`
--     for a negative chat id, `cnone` for none) and `u<user>` for the person it is about.
--     `agent_core::scope::Scope::memories_fts` writes the MATCH filter over them, a superset of
--     the scope's SQL predicate, which still decides what is seen;
--   * the rowid derived from the ref (memory id × 2, note id × 2 + 1), so the triggers delete a
--     row by rowid instead of scanning.
-- The content and refs are copied from the old index, so nothing is re-tokenized from the
-- tables and nothing that was searchable is lost.

DROP TRIGGER IF EXISTS memories_fts_insert;
DROP TRIGGER IF EXISTS memories_fts_delete;
DROP TRIGGER IF EXISTS memories_fts_update;
DROP TRIGGER IF EXISTS notes_fts_insert;
DROP TRIGGER IF EXISTS notes_fts_delete;

CREATE VIRTUAL TABLE memory_fts_new USING fts5(
  content,
  scope,
  ref UNINDEXED,
  chat_id UNINDEXED,
  about_user_id UNINDEXED,
  tokenize = 'unicode61 remove_diacritics 2'
);

INSERT INTO memory_fts_new (rowid, content, scope, ref, chat_id, about_user_id)
  SELECT CAST(substr(ref, 2) AS INTEGER) * 2 + (CASE WHEN ref LIKE 'n%' THEN 1 ELSE 0 END),
         content,
         (CASE WHEN chat_id IS NULL THEN 'cnone' WHEN chat_id < 0 THEN 'cm' || (-chat_id) ELSE 'c' || chat_id END)
           || (CASE WHEN about_user_id IS NULL THEN '' ELSE ' u' || about_user_id END),
         ref, chat_id, about_user_id
  FROM memory_fts;

DROP TABLE memory_fts;
ALTER TABLE memory_fts_new RENAME TO memory_fts;

CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
  INSERT INTO memory_fts (rowid, content, scope, ref, chat_id, about_user_id)
  VALUES (new.id * 2,
          trim(coalesce(new.entity, '') || ' ' || coalesce(new.attribute, '') || ' ' || new.value || ' ' || coalesce(new.topics, '')),
          (CASE WHEN new.chat_id IS NULL THEN 'cnone' WHEN new.chat_id < 0 THEN 'cm' || (-new.chat_id) ELSE 'c' || new.chat_id END)
            || (CASE WHEN new.about_user_id IS NULL THEN '' ELSE ' u' || new.about_user_id END),
          'm' || new.id, new.chat_id, new.about_user_id);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
  DELETE FROM memory_fts WHERE rowid = old.id * 2;
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF value, entity, attribute, topics, chat_id, about_user_id ON memories BEGIN
  DELETE FROM memory_fts WHERE rowid = old.id * 2;
  INSERT INTO memory_fts (rowid, content, scope, ref, chat_id, about_user_id)
  VALUES (new.id * 2,
          trim(coalesce(new.entity, '') || ' ' || coalesce(new.attribute, '') || ' ' || new.value || ' ' || coalesce(new.topics, '')),
          (CASE WHEN new.chat_id IS NULL THEN 'cnone' WHEN new.chat_id < 0 THEN 'cm' || (-new.chat_id) ELSE 'c' || new.chat_id END)
            || (CASE WHEN new.about_user_id IS NULL THEN '' ELSE ' u' || new.about_user_id END),
          'm' || new.id, new.chat_id, new.about_user_id);
END;

CREATE TRIGGER notes_fts_insert AFTER INSERT ON notes BEGIN
  INSERT INTO memory_fts (rowid, content, scope, ref, chat_id, about_user_id)
  VALUES (new.id * 2 + 1, new.content,
          (CASE WHEN new.chat_id IS NULL THEN 'cnone' WHEN new.chat_id < 0 THEN 'cm' || (-new.chat_id) ELSE 'c' || new.chat_id END)
            || (CASE WHEN new.about_user_id IS NULL THEN '' ELSE ' u' || new.about_user_id END),
          'n' || new.id, new.chat_id, new.about_user_id);
END;
CREATE TRIGGER notes_fts_delete AFTER DELETE ON notes BEGIN
  DELETE FROM memory_fts WHERE rowid = old.id * 2 + 1;
END;
