package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile renders a page with render into a temporary file beside path,
// readable by its owner only (the page shows distributions of a site's
// rows), and renames it to path once complete, so that path is never left
// half written. It returns the page's size.
func WriteFile(path string, render func(io.Writer) error) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".crffd-report-*.html")
	if err != nil {
		return 0, fmt.Errorf("report: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := render(tmp); err != nil {
		tmp.Close()
		return 0, err
	}
	fi, err := tmp.Stat()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("report: write %q: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, fmt.Errorf("report: write %q: %w", path, err)
	}
	return fi.Size(), nil
}
