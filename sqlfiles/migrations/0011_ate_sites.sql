-- 0011_ate_sites: sites names, as a JSON array, the sites whose rows a
-- global ATE covers: every site of the run, which with coordinator.min_sites
-- can be fewer than the coordinator lists. NULL for local ATEs and for
-- global ATEs written before this migration.
ALTER TABLE crff_ate ADD COLUMN sites TEXT CHECK (sites IS NULL OR scope = 'global' AND json_valid(sites));
