package spool

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

const (
	magic      = "CRFFROWS"
	version    = 1
	headerSize = 24
	// MaxCols is the most values a row may hold: far above any site's
	// covariates, and low enough that a corrupt header cannot ask for an
	// absurd buffer.
	MaxCols = 1 << 16
)

// ErrFormat reports a file that is not a spool this package wrote, or one
// cut short.
var ErrFormat = errors.New("spool: not a complete spool file")

// Writer appends rows to a new spool file.
type Writer struct {
	f    *os.File
	bw   *bufio.Writer
	cols int
	rows int
	buf  []byte
}

// Create creates the spool file path, readable and writable by its owner
// alone (it holds record values), for rows of cols values.
func Create(path string, cols int) (*Writer, error) {
	if cols < 1 || cols > MaxCols {
		return nil, fmt.Errorf("spool %q: %d values per row; want 1..%d", path, cols, MaxCols)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	w := &Writer{f: f, bw: bufio.NewWriterSize(f, 1<<20), cols: cols, buf: make([]byte, 8*cols)}
	if _, err := w.bw.Write(header(cols, 0)); err != nil {
		f.Close()
		return nil, fmt.Errorf("spool %q: %w", path, err)
	}
	return w, nil
}

func header(cols, rows int) []byte {
	h := make([]byte, headerSize)
	copy(h, magic)
	binary.LittleEndian.PutUint32(h[8:], version)
	binary.LittleEndian.PutUint32(h[12:], uint32(cols))
	binary.LittleEndian.PutUint64(h[16:], uint64(rows))
	return h
}

// Append adds one row of exactly cols values.
func (w *Writer) Append(row []float64) error {
	if len(row) != w.cols {
		return fmt.Errorf("spool %q: row %d has %d values; want %d", w.f.Name(), w.rows, len(row), w.cols)
	}
	for j, v := range row {
		binary.LittleEndian.PutUint64(w.buf[8*j:], math.Float64bits(v))
	}
	if _, err := w.bw.Write(w.buf); err != nil {
		return fmt.Errorf("spool %q: %w", w.f.Name(), err)
	}
	w.rows++
	return nil
}

// Rows returns the rows appended so far.
func (w *Writer) Rows() int { return w.rows }

// Close writes the rows out, records their count in the header and
// closes the file. Until then a File refuses it.
func (w *Writer) Close() error {
	err := w.bw.Flush()
	if err == nil {
		_, err = w.f.WriteAt(header(w.cols, w.rows), 0)
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spool %q: %w", w.f.Name(), err)
	}
	return nil
}

// File reads the rows of a spool file.
type File struct {
	f          *os.File
	cols, rows int
	buf        []byte
}

// Open opens the spool file path written by a Writer.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("spool: %w", err)
	}
	h := make([]byte, headerSize)
	if _, err := io.ReadFull(f, h); err != nil {
		f.Close()
		return nil, fmt.Errorf("spool %q: %w: header: %v", path, ErrFormat, err)
	}
	cols, rows, err := parseHeader(h, fi.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("spool %q: %w", path, err)
	}
	return &File{f: f, cols: cols, rows: rows}, nil
}

// parseHeader returns the values per row and the rows of a spool whose
// header is h and whose file is size bytes long.
func parseHeader(h []byte, size int64) (cols, rows int, err error) {
	if len(h) < headerSize || string(h[:8]) != magic {
		return 0, 0, fmt.Errorf("%w: no spool header", ErrFormat)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != version {
		return 0, 0, fmt.Errorf("%w: version %d; this crffd reads version %d", ErrFormat, v, version)
	}
	c := binary.LittleEndian.Uint32(h[12:])
	r := binary.LittleEndian.Uint64(h[16:])
	if c < 1 || c > MaxCols {
		return 0, 0, fmt.Errorf("%w: %d values per row; want 1..%d", ErrFormat, c, MaxCols)
	}
	body := uint64(size) - headerSize
	if size < headerSize || r > body/(8*uint64(c)) || r*8*uint64(c) != body {
		return 0, 0, fmt.Errorf("%w: %d rows of %d values need %d bytes after the header; the file has %d", ErrFormat, r, c, r*8*uint64(c), size-headerSize)
	}
	return int(c), int(r), nil
}

// Rows returns the file's row count.
func (f *File) Rows() int { return f.rows }

// Cols returns the values per row.
func (f *File) Cols() int { return f.cols }

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// ReadRange reads rows lo..hi−1 into dst, row after row: dst holds
// exactly (hi−lo)·Cols values.
func (f *File) ReadRange(lo, hi int, dst []float64) error {
	if lo < 0 || hi > f.rows || lo > hi {
		return fmt.Errorf("spool %q: rows %d..%d of %d", f.f.Name(), lo, hi, f.rows)
	}
	if len(dst) != (hi-lo)*f.cols {
		return fmt.Errorf("spool %q: %d values for %d rows of %d", f.f.Name(), len(dst), hi-lo, f.cols)
	}
	return f.read(lo, hi, dst)
}

// read reads rows lo..hi−1 into dst, already checked.
func (f *File) read(lo, hi int, dst []float64) error {
	n := 8 * f.cols * (hi - lo)
	if cap(f.buf) < n {
		f.buf = make([]byte, n)
	}
	b := f.buf[:n]
	if _, err := f.f.ReadAt(b, headerSize+int64(8*f.cols)*int64(lo)); err != nil {
		return fmt.Errorf("spool %q: rows %d..%d: %w", f.f.Name(), lo, hi, err)
	}
	for k := range dst {
		dst[k] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*k:]))
	}
	return nil
}

// ReadRows reads the rows idx, which ascend, into dst, row after row: dst
// holds exactly len(idx)·Cols values. Runs of consecutive rows are read
// at once.
func (f *File) ReadRows(idx []int, dst []float64) error {
	if len(dst) != len(idx)*f.cols {
		return fmt.Errorf("spool %q: %d values for %d rows of %d", f.f.Name(), len(dst), len(idx), f.cols)
	}
	for k := 0; k < len(idx); {
		i := idx[k]
		if i < 0 || i >= f.rows || k > 0 && i <= idx[k-1] {
			return fmt.Errorf("spool %q: row %d (at %d of the rows asked for) is not after the one before it within 0..%d", f.f.Name(), i, k, f.rows-1)
		}
		run := 1
		for k+run < len(idx) && idx[k+run] == i+run && i+run < f.rows {
			run++
		}
		if err := f.read(i, i+run, dst[k*f.cols:(k+run)*f.cols]); err != nil {
			return err
		}
		k += run
	}
	return nil
}
