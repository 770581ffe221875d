// Package sqlfiles holds the SQL that crffd runs in its SQLite files: the
// numbered schema migrations of a site's file and of a coordinator's, the
// one mechanism that applies them ([Apply]), and the templates of the views
// that depend on a site's configuration. The files are embedded in the
// binary with go:embed, so a crffd executable carries exactly the schema it
// was built with.
//
// The package is named sqlfiles, not sql, so that it can be imported beside
// database/sql without an alias.
//
// # Migrations
//
// migrations/NNNN_name.sql are applied in the order of their 4-digit number,
// which starts at 0001 and has no gaps. Each file is one migration, applied in
// one transaction together with the row that records it in
// crff_schema_version; see [Migrations] and [Latest]. A file already released
// is never edited: a schema change is a new file.
//
// Every object a migration creates is named crff_…; migrations never read or
// change the user's tables, and the package tests check both rules.
//
// coordinator/NNNN_name.sql are the migrations of a coordinator's own file
// (package store/coordstore), numbered on their own by the same rules and
// recorded in the same crff_schema_version table of that file; see
// [CoordinatorMigrations]. Both files are migrated by [Apply] inside one
// IMMEDIATE transaction, after [SchemaVersion] has read what the file has.
//
// # Views
//
// views/*.sql are text/template files for objects whose SQL depends on the
// site configuration, such as crff_cate_records, which joins the user's
// table to its CATE. [CateRecordsView] renders it with identifiers quoted by
// [QuoteIdent]; [OverlapView] renders crff_overlap, the scored rows per
// propensity bucket and treatment arm, and [PositivityView] crff_positivity,
// the site's verdict by the rules of package positivity, whose thresholds
// are rendered into both. The views use no SQL newer than SQLite 3.25, so
// that older clients can still read the file's schema.
package sqlfiles
