-- The setup of a run: what scoring needs, besides the model state, to
-- rebuild the model without retraining. It is JSON: the kernel (name and
-- parameters), the estimator's configuration, the pooled standardisation
-- and the site's index in its federation. It holds no row values.
ALTER TABLE crff_run ADD COLUMN setup TEXT CHECK (setup IS NULL OR json_valid(setup));
