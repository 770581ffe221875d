-- crff_cate_records: every row of the user's table or view with its CATE
-- (NULL until the row is scored, and for rejected rows). Rendered per site
-- by crffd from the configured table and id column, which arrive here as
-- quoted identifiers. The join compares the id without affinity (+r.id), as
-- crff_cate stores ids exactly as read, so that SQLite can use crff_cate's
-- primary key whatever the id column's declared type.
CREATE VIEW crff_cate_records AS
SELECT r.*,
       c.cate, c.se, c.lower, c.upper,
       c.latent_cate, c.latent_sd, c.latent_q025, c.latent_q975,
       c.y0, c.y1, c.propensity,
       c.run, c.scored_at
FROM {{.Table}} AS r
LEFT JOIN crff_cate AS c ON c.row_id = +r.{{.ID}}
