package store

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes what the import r into the site file db did, as crffd
// import prints it: the table and its columns, the separator when it is not
// a comma, the warnings of a header imported as data or of a file of one
// column, why each TEXT column is TEXT (but for those only a header read as
// data made TEXT, which its warning names), and a summary of the types
// with the empty fields per column.
func (r ImportResult) WriteText(w io.Writer, db string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "imported %d rows into %s.%s (%s)\n", r.Rows, db, r.Table, describeColumns(r.Columns))
	if r.Comma != ',' {
		how := "given"
		if r.Detected {
			how = "detected"
		}
		fmt.Fprintf(&b, "delimiter: %s (%s)\n", DelimiterName(r.Comma), how)
	}
	if r.Detected && len(r.Columns) == 1 {
		b.WriteString("warning: the file has a single column: no comma, semicolon, tab or pipe splits its lines into fields; if another character separates them, name it with --delimiter\n")
	}
	text := r.Text
	if r.HeaderLike {
		text = r.writeHeaderLike(&b)
	}
	writeTextColumns(&b, text)
	b.WriteString(r.typesLine())
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHeaderLike writes the warning of a header imported as data, naming
// the columns of numbers it alone made TEXT, and returns the other TEXT
// columns. Such a column is TEXT only because of the header read as data:
// say so once, here, rather than blaming a name on a line of its own per
// column.
func (r ImportResult) writeHeaderLike(b *strings.Builder) []TextColumn {
	var byHeader []string
	var text []TextColumn
	for _, c := range r.Text {
		if c.ByHeader {
			byHeader = append(byHeader, c.Name)
			continue
		}
		text = append(text, c)
	}
	made := ""
	switch len(byHeader) {
	case 0:
	case 1:
		made = ", which made column " + byHeader[0] + " TEXT"
	default:
		made = ", which made columns " + strings.Join(byHeader, ", ") + " TEXT"
	}
	fmt.Fprintf(b, "warning: the first row looks like column names (none of its fields is a number, while the rows below hold numbers) but was imported as a data row%s; run import again with --header --replace\n", made)
	return text
}

// typesLine returns the summary of the column types, with the empty
// fields per column.
func (r ImportResult) typesLine() string {
	count := map[ColumnType]int{}
	var empty []string
	for j, c := range r.Columns {
		count[c.Type]++
		if j < len(r.Nulls) && r.Nulls[j] > 0 {
			empty = append(empty, fmt.Sprintf("%s %d", c.Name, r.Nulls[j]))
		}
	}
	var parts []string
	for _, t := range []ColumnType{Integer, Real, Text} {
		if count[t] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[t], t))
		}
	}
	none := "none"
	if len(empty) > 0 {
		none = strings.Join(empty, ", ")
	}
	return fmt.Sprintf("types: %s; empty fields (NULL): %s\n", strings.Join(parts, ", "), none)
}

// describeColumns lists cols with their types.
func describeColumns(cols []Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + " " + string(c.Type)
	}
	return strings.Join(parts, ", ")
}

// writeTextColumns says why each TEXT column of an import is TEXT: a
// "warning:" line for a column of numbers with some other values, which
// crffd fit refuses as a covariate, and a plain line for the others.
func writeTextColumns(b *strings.Builder, cols []TextColumn) {
	for _, c := range cols {
		line := c.String()
		switch {
		case c.Mixed():
			line = "warning: " + line + "; as a covariate, crffd fit refuses these rows until the values are corrected" +
				" (or leaves them out with site.on_invalid: skip)"
		case c.Values > 0:
			line += "; crffd fit does not choose it as a covariate"
		}
		b.WriteString(line + "\n")
	}
}
