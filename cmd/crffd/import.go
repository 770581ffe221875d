package main

import (
	"fmt"
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
unless --replace is given. Without --header the columns are named c1, c2, ...`,
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
			_, err = fmt.Fprintf(a.stdout, "imported %d rows into %s.%s (%s)\n", res.Rows, db, res.Table, describeColumns(res.Columns))
			return err
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
