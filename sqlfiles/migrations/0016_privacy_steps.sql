-- 0016_privacy_steps: a private run's charges by step. Each charge is what
-- one step of a run spends: the training rounds of one model ("training
-- latent"), or an aggregate the site releases with noise ("moments",
-- "ate", "selection"); steps Gaussian mechanisms of noise multiplier
-- noise, each on a Poisson sample of rate q of the site's rows (q = 1:
-- every row). epsilon is the step alone, total every charge so far
-- composed by Rényi DP. relation is the neighbouring relation the
-- guarantee is stated under, and exact the aggregates the run released
-- without noise (privacy.exact), comma-separated. Charges recorded before
-- this migration were whole runs of full passes: step 'training', q 1.
ALTER TABLE crff_privacy_charge ADD COLUMN step TEXT NOT NULL DEFAULT 'training';
ALTER TABLE crff_privacy_charge ADD COLUMN q REAL NOT NULL DEFAULT 1 CHECK (q > 0 AND q <= 1);
ALTER TABLE crff_privacy_charge ADD COLUMN relation TEXT NOT NULL DEFAULT 'add/remove';
ALTER TABLE crff_privacy_charge ADD COLUMN exact TEXT NOT NULL DEFAULT '';

DROP VIEW crff_privacy;

-- crff_privacy: per run and step, the ε it spent alone and δ, the ε spent
-- by every charge up to it, the budget and what remains of it, and the
-- mechanism behind it.
CREATE VIEW crff_privacy AS
SELECT run, step, at, epsilon, delta, total AS epsilon_spent, budget AS epsilon_budget,
       max(0, budget - total) AS epsilon_remaining,
       rounds, steps AS mechanisms, q AS sampling_rate, noise AS noise_multiplier, clip,
       relation, exact
FROM crff_privacy_charge
ORDER BY seq;
