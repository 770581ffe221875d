// Package spool keeps rows of numbers in a file of fixed-width records,
// so that a fit of millions of rows reads them a range or a batch at a
// time instead of holding them.
//
// A spool file is a 24-byte header, the magic "CRFFROWS", the format
// version (uint32), the values per row (uint32) and the row count
// (uint64), then the rows, each its values as little-endian IEEE 754
// float64. Row i thus starts at byte 24 + 8·cols·i, and any range or any
// set of rows is read with positioned reads (pread) that the operating
// system's page cache serves: the process holds only what it asked for.
//
// A Writer appends rows and writes the row count into the header when it
// is closed; a File reads them. A File refuses a header that is not a
// spool's, and a size that is not the header's rows: a file cut short or
// written over is named, not read as rows.
package spool
