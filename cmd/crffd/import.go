package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/store"
)

func newImportCmd(a *app) *cobra.Command {
	var db, table, csvPath string
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
value's field empty, which is NULL and is refused or skipped the same way.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := os.Open(csvPath)
			if err != nil {
				return fmt.Errorf("import: %w", err)
			}
			defer f.Close()
			res, err := store.ImportCSV(cmd.Context(), db, table, f, store.ImportOptions{
				Header: header, Replace: replace, Name: csvPath,
			})
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(a.stdout, "imported %d rows into %s.%s (%s)\n", res.Rows, db, res.Table, describeColumns(res.Columns)); err != nil {
				return err
			}
			return printTextColumns(a.stdout, res.Text)
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", "", "site SQLite file")
	f.StringVar(&table, "table", "", "table to create")
	f.StringVar(&csvPath, "csv", "", "CSV file to read")
	f.BoolVar(&header, "header", false, "the first line names the columns")
	f.BoolVar(&replace, "replace", false, "replace an existing table of the same name")
	for _, name := range []string{"db", "table", "csv"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func describeColumns(cols []store.Column) string {
	s := ""
	for i, c := range cols {
		if i > 0 {
			s += ", "
		}
		s += c.Name + " " + string(c.Type)
	}
	return s
}

// printTextColumns says why each TEXT column of an import is TEXT: a
// "warning:" line for a column of numbers with some other values, which
// crffd fit refuses as a covariate, and a plain line for the others.
func printTextColumns(w io.Writer, cols []store.TextColumn) error {
	for _, c := range cols {
		line := c.String()
		switch {
		case c.Mixed():
			line = "warning: " + line + "; as a covariate, crffd fit refuses these rows until the values are corrected" +
				" (or leaves them out with site.on_invalid: skip)"
		case c.Values > 0:
			line += "; crffd fit does not choose it as a covariate"
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
