-- crff_positivity: the site's positivity verdict over the current run's
-- scored rows, one row. treated and control count the scored rows by arm
-- (rows whose treatment is neither 0 nor 1 are counted in neither); outside
-- counts those of them with a propensity outside the positivity bounds, and
-- outside_share is outside over treated + control (NULL when there are no
-- such rows). warning is NULL when the rules of sql/positivity.go hold, and
-- otherwise says which fail, in the words crffd fit and crffd report use:
-- an arm below the soft minimum (rows or share), or too large a share of
-- propensities outside the bounds. Rendered per site by crffd from the
-- configured table, id and treatment columns (quoted identifiers, and the
-- treatment column's name as a string literal) and from the thresholds.
-- It uses no SQL newer than SQLite 3.25 (2018), so that older clients can
-- still open the file: a view they cannot parse makes the whole schema
-- unreadable to them.
CREATE VIEW crff_positivity (treated, control, outside, outside_share, warning) AS
WITH scored (p, w) AS (
    SELECT c.propensity, r.{{.Treatment}}
    FROM {{.Table}} AS r
    CROSS JOIN crff_cate AS c ON c.row_id = +r.{{.ID}}
),
counts (t, c, o) AS (
    SELECT count(CASE WHEN w = 1 THEN 1 END),
           count(CASE WHEN w = 0 THEN 1 END),
           count(CASE WHEN (w = 1 OR w = 0) AND (p < {{.Low}} OR p > {{.High}}) THEN 1 END)
    FROM scored
),
arms (k, arm, bit, rows, n) AS (
    SELECT 1, 'treated', 1, t, t + c FROM counts
    UNION ALL
    SELECT 2, 'control', 0, c, t + c FROM counts
),
problems (k, text) AS (
    SELECT k, printf('%d %s row%s (', rows, arm, CASE rows WHEN 1 THEN '' ELSE 's' END)
              || {{.Name}} || printf(' = %d) among %d (%.1f%%), ', bit, n, round(1000.0 * rows / n) / 10)
              || {{.ArmRule}}
    FROM arms
    WHERE n > 0 AND (rows < {{.SoftRows}} OR rows < {{.SoftShare}} * n)
    UNION ALL
    SELECT 3, printf('%d of %d rows (%.1f%%) %s a propensity outside ', o, t + c,
                     round(1000.0 * o / (t + c)) / 10, CASE o WHEN 1 THEN 'has' ELSE 'have' END)
              || {{.OutsideRule}}
    FROM counts
    WHERE t + c > 0 AND o > {{.MaxOutside}} * (t + c)
)
SELECT t, c, o, o * 1.0 / nullif(t + c, 0),
       nullif(ltrim(coalesce('; ' || (SELECT text FROM problems WHERE k = 1), '')
                    || coalesce('; ' || (SELECT text FROM problems WHERE k = 2), '')
                    || coalesce('; ' || (SELECT text FROM problems WHERE k = 3), ''), '; '), '')
FROM counts
