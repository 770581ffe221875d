-- 0009_cate_digest: x_digest is the SHA-256 of the covariate values a row's
-- CATE was computed from, as stored in the user's table. crffd site compares
-- it with the row's values every poll and scores again a row whose
-- covariates were edited. NULL for CATEs written before this migration,
-- which are then never compared.
ALTER TABLE crff_cate ADD COLUMN x_digest BLOB CHECK (x_digest IS NULL OR length(x_digest) = 32);
