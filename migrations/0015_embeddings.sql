-- Embeddings are now asked for at 768 dimensions and stored as bytes (core::memory::vector):
-- vectors stored before (JSON arrays at the model's default size) no longer compare with a
-- 768-dimension query, so they are dropped and the next consolidation of their conversation
-- embeds those memories again (full-text search finds them meanwhile).
UPDATE memories SET embedding = NULL WHERE embedding IS NOT NULL AND embedding NOT LIKE 'q8:%';
