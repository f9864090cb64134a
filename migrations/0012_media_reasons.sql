-- Media that can never be viewed are kept too (issue 14): `reason` says why an item was not
-- viewed (status unsupported or too_large: "a document of a type I cannot read
-- (application/zip)", "video, 48.0 MB, too large to view"), so the operator sees it in
-- GET /api/v1/media and no turn or job tries it again; `failed` now also means the file is
-- gone (an expired file id, a 404 download: reason says which). A sticker's set and emoji are kept
-- with its description, so the stickers offered to send_sticker can say what they show.
ALTER TABLE media ADD COLUMN reason TEXT;
ALTER TABLE media ADD COLUMN set_name TEXT;
ALTER TABLE media ADD COLUMN emoji TEXT;
CREATE INDEX media_stickers ON media (set_name) WHERE set_name IS NOT NULL;
