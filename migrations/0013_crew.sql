-- Crew mode (issue 15): each model call records the crew persona that made it (NULL for the
-- single bot and for consolidation), so /usage and the costs API break costs down by persona.
-- The persona is also the suffix of a crew turn's id (`…~<persona>`); this column is what the
-- totals group by.
ALTER TABLE model_calls ADD COLUMN persona TEXT;
