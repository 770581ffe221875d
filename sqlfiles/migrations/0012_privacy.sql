-- 0012_privacy: the site's differential-privacy ledger. A private site
-- (privacy.epsilon) records one charge per run it takes part in, before it
-- computes anything from its rows for the run, whether or not the run
-- then completes: the noise it adds is calibrated so that the run alone
-- spends epsilon at delta over the rounds it will answer, and total is
-- every charge so far composed by Rényi DP (this one included).
CREATE TABLE crff_privacy_charge (
    seq      INTEGER PRIMARY KEY,
    run      TEXT NOT NULL,
    at       TEXT NOT NULL,
    rounds   INTEGER NOT NULL CHECK (rounds > 0),
    steps    INTEGER NOT NULL CHECK (steps >= rounds),
    noise    REAL NOT NULL CHECK (noise > 0),
    clip     REAL NOT NULL CHECK (clip > 0),
    delta    REAL NOT NULL CHECK (delta > 0 AND delta < 1),
    epsilon  REAL NOT NULL CHECK (epsilon > 0),
    total    REAL NOT NULL CHECK (total >= epsilon),
    budget   REAL NOT NULL CHECK (budget > 0)
);

-- crff_privacy: per run, the ε and δ it spent, the ε spent by every run up
-- to it, the budget, and what remains of it.
CREATE VIEW crff_privacy AS
SELECT run, at, epsilon, delta, total AS epsilon_spent, budget AS epsilon_budget,
       max(0, budget - total) AS epsilon_remaining,
       rounds AS rounds_per_model, steps AS rounds, noise AS noise_multiplier, clip
FROM crff_privacy_charge
ORDER BY seq;
