-- crff_overlap: propensity overlap of the current run's scored rows, per
-- propensity bucket, with the treated and control counts. Rendered per site
-- by crffd from the configured table, id and treatment columns, which arrive
-- here as quoted identifiers, and from the positivity bounds of
-- sql/positivity.go. Buckets are half-open, [lower, upper), except the last,
-- [0.99, 1]. extreme is 1 for the buckets below the lower bound and above
-- the upper one, where positivity (every kind of row can receive either arm)
-- is in doubt. share is the bucket's share of all the rows counted (NULL
-- when there are none). Rows whose treatment is neither 0 nor 1 (NULL) are
-- counted in neither arm. The site's verdict is in crff_positivity.
CREATE VIEW crff_overlap (bucket, lower, upper, treated, control, extreme, share) AS
WITH edges (bucket, lower, upper) AS (
    VALUES (1, 0.0, 0.01), (2, 0.01, 0.05), (3, 0.05, 0.1), (4, 0.1, 0.25),
           (5, 0.25, 0.5), (6, 0.5, 0.75), (7, 0.75, 0.9), (8, 0.9, 0.95),
           (9, 0.95, 0.99), (10, 0.99, 1.0)
),
scored (p, w) AS (
    SELECT c.propensity, r.{{.Treatment}}
    FROM {{.Table}} AS r
    CROSS JOIN crff_cate AS c ON c.row_id = +r.{{.ID}}
),
counted (bucket, lower, upper, treated, control) AS (
    SELECT e.bucket, e.lower, e.upper,
           count(CASE WHEN s.w = 1 THEN 1 END),
           count(CASE WHEN s.w = 0 THEN 1 END)
    FROM edges AS e
    LEFT JOIN scored AS s
        ON s.p >= e.lower AND (s.p < e.upper OR (e.upper = 1.0 AND s.p <= 1.0))
    GROUP BY e.bucket, e.lower, e.upper
)
SELECT bucket, lower, upper, treated, control,
       lower < {{.Low}} OR upper > {{.High}},
       (treated + control) * 1.0 / nullif((SELECT sum(treated + control) FROM counted), 0)
FROM counted
ORDER BY bucket
