-- Who supplied a memory or note about a person (issue 35, item 14): until now any member of a
-- group could have the bot note something about another member ("remember that Alice owes me
-- 100 euros"), and the scope then showed it in Alice's private chat as if it were hers. Now a
-- row about a person records who supplied it, and only what the person supplied about
-- themself crosses into their private chat (`core::scope`); what someone else said about them
-- stays in the chat where it was said.
--
-- `supplied_by`: the person whose words it comes from (a note: who asked for it in the turn,
-- `core::authority::burst_sender`; a memory: who wrote every message it cites,
-- `core::authority::supplier`); NULL: unknown (about nobody, or nothing to tell by). Rows
-- written by the previous release's code leave it NULL: they stay in their own chat.
ALTER TABLE memories ADD COLUMN supplied_by INTEGER;
ALTER TABLE notes ADD COLUMN supplied_by INTEGER;

-- What is known of the rows already stored: learned in the person's own private chat, or a
-- memory whose every cited message is the person's own.
UPDATE memories SET supplied_by = about_user_id
WHERE about_user_id IS NOT NULL AND (
  chat_id = about_user_id
  OR (json_valid(source_ids) AND json_array_length(source_ids) > 0
      AND NOT EXISTS (
        SELECT 1 FROM json_each(memories.source_ids) AS j
        LEFT JOIN messages AS m ON m.chat_id = memories.chat_id AND m.message_id = j.value
        WHERE m.user_id IS NOT memories.about_user_id)));
UPDATE notes SET supplied_by = about_user_id WHERE about_user_id IS NOT NULL AND chat_id = about_user_id;
