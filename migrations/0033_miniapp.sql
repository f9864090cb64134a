-- The Mini App (issue 38).
--
-- A person may now correct a note's wording (only memories could change before, by
-- consolidation): the search index follows an edit as it follows a memory's.
CREATE TRIGGER notes_fts_update AFTER UPDATE OF content, chat_id, about_user_id ON notes BEGIN
  DELETE FROM memory_fts WHERE rowid = old.id * 2 + 1;
  INSERT INTO memory_fts (rowid, content, scope, ref, chat_id, about_user_id)
  VALUES (new.id * 2 + 1, new.content,
          (CASE WHEN new.chat_id IS NULL THEN 'cnone' WHEN new.chat_id < 0 THEN 'cm' || (-new.chat_id) ELSE 'c' || new.chat_id END)
            || (CASE WHEN new.about_user_id IS NULL THEN '' ELSE ' u' || new.about_user_id END),
          'n' || new.id, new.chat_id, new.about_user_id);
END;

-- A group's link to its shared memories in the Mini App: the opaque start parameter the bot
-- issued in the group (`core::access::webapp::group_link`), mapped here to the group. A
-- parameter not in this table means nothing.
CREATE TABLE miniapp_links (
  token      TEXT PRIMARY KEY,
  chat_id    INTEGER NOT NULL UNIQUE,
  created_at INTEGER NOT NULL
);
