package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/config"
	"github.com/crffd/crffd/store"
)

func newImportCmd(a *app) *cobra.Command {
	var db, table, csvPath, delimiter string
	var header, replace bool
	cmd := &cobra.Command{
		Use:   "import --db FILE --table NAME --csv FILE",
		Short: "Load a CSV file into a table of a site file, with column types inferred",
		Long: `import creates table NAME in the SQLite file FILE (created if missing) from a
CSV file, inferring INTEGER, REAL or TEXT per column; empty fields become NULL.
The whole import is one transaction. It refuses to overwrite an existing table
unless --replace is given. Without --header the columns are named c1, c2, ...

A column is TEXT as soon as one of its fields is not a number (a code with a
leading zero such as 007 counts as text), and import says why for every TEXT
column, quoting the first such field and its line. It still imports the table,
since columns of names or codes are meant to be TEXT, but a column of numbers
with a few other values (such as "n/a") gets a "warning:" line: when crffd fit
uses it as a covariate (every column holding a number is one unless
site.covariates lists them), fit refuses those rows, naming them, or leaves
them out with site.on_invalid: skip. Correct the values, or leave a missing
value's field empty, which is NULL and is refused or skipped the same way.
Every TEXT column of numbers is reported with the count of its other values
and the lines of the first three.

The field separator is detected from the first 20 lines unless --delimiter
names it (one character, or comma, semicolon, tab or pipe; \t is a tab): of
comma, semicolon, tab and pipe, the one that gives every line the same number
of fields, more than one; when several do, the one whose fields are most
often numbers (so that "1;2,5" is read as two fields), then the one giving
more fields, then comma. import prints "delimiter: semicolon (detected)"
when it did not use a comma. When no separator splits the lines, it imports
one column and warns: name the separator with --delimiter if there is one.
A number written with a decimal comma (2,5) is not read as a number: its
column is TEXT, and import says so.

Without --header, import warns when the first row looks like column names:
every field of it is filled and is not a number, while in at least one
column most of the fields below it are numbers. That row is still imported,
as a data row, and the exit status is 0; the warning names the columns of
numbers it made TEXT. Run import again with --header --replace.

After the import it prints a summary of the types: how many columns are
INTEGER, REAL and TEXT, and each column that has empty fields (stored as
NULL) with their count, for example

  types: 3 INTEGER, 1 REAL, 1 TEXT; empty fields (NULL): age 2, bmi 14`,
		Example: `  # a CSV file with a header row
  crffd import --db clinic.sqlite --table patients --csv examples/patients.csv --header

  # a semicolon-separated export with a header row (the separator is detected),
  # replacing the table imported before
  crffd import --db clinic.sqlite --table patients --csv export.csv --header --replace

  # a file of numbers separated by tabs, without a header row: columns c1, c2, ...
  crffd import --db clinic.sqlite --table labs --csv labs.tsv --delimiter tab`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			comma, err := config.ParseDelimiter(delimiter)
			if err != nil {
				return err
			}
			f, err := os.Open(csvPath)
			if err != nil {
				return fmt.Errorf("import: %w", err)
			}
			defer f.Close()
			res, err := store.ImportCSV(cmd.Context(), db, table, f, store.ImportOptions{
				Header: header, Replace: replace, Name: csvPath, Comma: comma,
			})
			if err != nil {
				return err
			}
			return res.WriteText(a.stdout, db)
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", "", "site SQLite file")
	f.StringVar(&table, "table", "", "table to create")
	f.StringVar(&csvPath, "csv", "", "CSV file to read")
	f.BoolVar(&header, "header", false, "the first line names the columns")
	f.BoolVar(&replace, "replace", false, "replace an existing table of the same name")
	f.StringVar(&delimiter, "delimiter", "", `field separator: one character, or comma, semicolon, tab (or \t) or pipe (default: detected)`)
	for _, name := range []string{"db", "table", "csv"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
