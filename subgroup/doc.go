// Package subgroup decides whether a user-written subgroup predicate, a row
// of the site's crff_subgroup table such as `age >= 65 AND sex = 1`, may be
// inlined into a query of the site's own table alone,
//
//	SELECT <id>, <treatment> FROM <table> WHERE (<predicate>)
//
// against a hospital's SQLite file (store joins its result to the scores). The predicate is untrusted text and SQL
// has no way to bind an expression as a parameter, so the text itself must
// be vetted before it reaches SQLite.
//
// The contract of [Check]: a predicate it accepts reads only the columns it
// was given, calls only the functions in [Functions] (plus what LIKE, GLOB
// and COLLATE do), and cannot end the parenthesised WHERE clause, start
// another statement, open a subquery, name another table or schema, or leave
// a string, quoted name or comment open for the text around it. It does so
// by tokenizing the predicate the way SQLite's own tokenizer does and
// accepting only a small allow-list of tokens, so that anything SQLite could
// read differently is refused rather than guessed at.
//
// Check does not prove that the predicate is well formed or boolean-typed:
// `age >`, `age = 'x' = 1` or `CAST(age)` pass Check and SQLite rejects or
// evaluates them when the query is prepared; the caller reports that error
// to the user as it would any other.
package subgroup
